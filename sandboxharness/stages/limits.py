"""Whose limit was it? A harness limit is never the candidate's fault nor bad input.

Before anything runs, the result files a plan will write are sized from the definition's
shapes: a workload whose honest results cannot fit the policy's result cap, the sandbox's
file-size limit or its out-dir quota is an ``InfrastructureError`` naming the limit (the
harness cannot judge it as configured). A candidate that hits a limit an honest solution
would not is a reason code (``RESOURCE_LIMIT``); the reference hitting one is the harness's
problem, and only the reference *raising* is the definition's.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InfrastructureError, InputError
from ..models.policy import Limits, Policy
from ..models.verdict import ReasonCode
from .cases import Case
from .session import KernelFault

_BYTES = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2,
          "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
          "float4_e2m1": 1}
HARNESS_LIMITS = (ReasonCode.RESOURCE_LIMIT, ReasonCode.TIMEOUT, ReasonCode.COMPILE_TIMEOUT,
                  ReasonCode.WORKER_PROTOCOL, ReasonCode.INTEGRITY_VIOLATION)
"""Reference faults that say the harness (its limits, its worker) failed, not the definition."""


def _tensor_bytes(items: list[dict[str, Any]]) -> int:
    total = 0
    for it in items:
        shape = it.get("shape")
        if isinstance(shape, list):
            total += math.prod(int(d) for d in shape) * _BYTES.get(str(it.get("dtype")), 8)
    return total


def result_bytes(case: Case) -> int:
    """One call's result file: its outputs and its post-call inputs."""
    return _tensor_bytes(case.payload["outputs"]) + _tensor_bytes(case.payload["inputs"])


def session_limits(limits: Limits, cases: int) -> Limits:
    """A worker session's own limits for a plan of ``cases`` cases: ``run_timeout_s`` and
    ``cpu_time_s`` are per case (FlashInfer-Bench bounds each workload, not the set), so a
    full workload set is never cut short for its size; every call stays bounded by
    ``run_timeout_s`` on its own."""
    n = max(1, cases)
    return limits.model_copy(update={"cpu_time_s": limits.cpu_time_s * n,
                                     "run_timeout_s": limits.run_timeout_s * n})


def session_deadline_s(limits: Limits, cases: int) -> float:
    """Wall clock for a whole worker session: its compile, then every case."""
    return limits.compile_timeout_s + session_limits(limits, cases).run_timeout_s


def check_plan(cases: list[Case], policy: Policy, out_quota_mb: int | None) -> None:
    """Refuse, before anything runs, a plan whose honest results the limits cannot hold.

    Calls are judged as they come and their files removed (``job.execute``), so the out dir
    holds one call's results at a time, or a case's sampled timed calls, dumped together."""
    lim = policy.limits
    caps = (("limits.max_result_mb", lim.max_result_mb),
            ("limits.max_file_size_mb", lim.max_file_size_mb))
    at_once = 0
    for case in cases:
        need = result_bytes(case)
        for name, cap_mb in caps:
            if need > cap_mb * 2**20:
                raise InfrastructureError(
                    f"workload {case.workload} needs {need / 2**20:.0f} MB per result file, "
                    f"over the policy's {name}={cap_mb}: raise it to evaluate this workload")
        dumped = 0 if case.heldout else policy.benchmark.sampled_checks
        at_once = max(at_once, need * max(1, dumped))
    if out_quota_mb is not None and at_once > out_quota_mb * 2**20:
        raise InfrastructureError(
            f"one workload's results take {at_once / 2**20:.0f} MB at once, over the sandbox's "
            f"out-dir quota of {out_quota_mb} MB: lower benchmark.sampled_checks, or raise the "
            "quota")


def overlap_fits(cases: list[Case], out_quota_mb: int | None) -> bool:
    """Whether two calls' results fit the out dir at once: then a call is judged while the
    next one runs (``job.execute``); else one at a time, as ``check_plan`` promised."""
    if out_quota_mb is None or not cases:
        return True
    return 2 * max(result_bytes(c) for c in cases) <= out_quota_mb * 2**20


def reference_fault(fault: KernelFault, phase: str | None, where: str) -> Exception:
    """The error to raise when the definition's reference did not finish its plan."""
    if fault.code in HARNESS_LIMITS:
        return InfrastructureError(f"{where}: the definition's reference hit a harness limit "
                                   f"during {phase}: {fault.message}")
    return InputError(f"the definition's reference failed during {phase}: {fault.message}",
                      where=where)
