"""Baselines timed in the same run as the candidate, and the GPU promotion gate.

A baseline is trusted code run like a candidate (its own sandboxed worker, the same plan, the
same seeds, the same timing method): the definition's reference always; the FlashInfer
function named by an ``fi_api:`` tag when there is an adapter for it here and flashinfer
imports inside the worker. FlashInfer JIT-builds a module at its first call (~36 s on an
H200): its cache lives in one directory per harness process, reused by every baseline job
of that process and never given to a candidate.

Gate (``Promotion``): a regime is one workload. It passes when the candidate's median beats
``baseline_median * min_speedup`` in each of ``min_repeats`` independent repeats
(consecutive blocks of its timed calls, each judged by its own median). Global promotion
needs every regime to pass; a win on some regimes only is recorded as ``archive_only`` and
the candidate is rejected (SLOWER_THAN_BASELINE).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..._internal.files import write_sources
from ...errors import InfrastructureError
from ...models import Policy, Reason, ReasonCode, Stage
from ...policy import RegimeGate, median
from ...sandbox.interface import JobSpec
from .. import compile_cuda
from ..client import hello_for_baseline
from ..context import EvaluationContext
from ..execute import RoleRun, run_role
from ..job import Execution
from . import roofline

CACHE_ENV = "SHX_BASELINE_CACHE"
"""Optional: a directory for the baselines' JIT cache shared by several harness processes."""

_ADAPTERS: dict[str, str] = {
    "flashinfer.norm.rmsnorm": (
        "import flashinfer\n\n"
        "def run(hidden_states, weight, *rest):\n"
        "    eps = float(rest[0]) if rest and rest[0] is not None else 1e-6\n"
        "    return flashinfer.norm.rmsnorm(hidden_states, weight, eps=eps)\n"),
    "flashinfer.activation.silu_and_mul": (
        "import flashinfer\n\n"
        "def run(input):\n"
        "    return flashinfer.activation.silu_and_mul(input)\n"),
}
_cache_root: Path | None = None


def adapter(fi_api: str | None) -> str | None:
    """Source of a returning-style ``run`` calling ``fi_api``; None when we have no adapter."""
    return _ADAPTERS.get(fi_api or "")


_FLASHINFER_DIR = threading.Lock()


def _cache_dir() -> Path:
    global _cache_root
    shared = os.environ.get(CACHE_ENV)
    if shared:
        Path(shared).mkdir(parents=True, exist_ok=True)
        return Path(shared)
    if _cache_root is None:
        _cache_root = Path(tempfile.mkdtemp(prefix="shx-baseline-"))
        atexit.register(shutil.rmtree, _cache_root, True)
    return _cache_root


def run_flashinfer(ctx: EvaluationContext, run: Execution, env: dict[str, str]
                   ) -> tuple[RoleRun | None, str]:
    """Time the FlashInfer baseline; (None, why) when there is none or it cannot run here."""
    definition = ctx.definition
    source = adapter(definition.fi_api)
    if source is None:
        return None, (f"no adapter for fi_api {definition.fi_api!r}" if definition.fi_api
                      else "the definition names no fi_api")
    with _FLASHINFER_DIR:  # one job at a time uses the persistent directory
        return _run_flashinfer(ctx, run, env, source)


def _run_flashinfer(ctx: EvaluationContext, run: Execution, env: dict[str, str], source: str
                    ) -> tuple[RoleRun | None, str]:
    policy = ctx.policy
    # one directory per harness process: src and out persist (out holds FlashInfer's JIT
    # workspace, so only the first evaluation pays the build), tmp is fresh per job
    base = _cache_dir() / "flashinfer"
    src, out = base / "src", base / "out"
    for d in (src, out):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    (src / "baseline.py").unlink(missing_ok=True)  # our own adapter, rewritten per job
    write_sources(src, [("baseline.py", source.encode("utf-8"))])
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=base))
    job = JobSpec(role="baseline", src_dir=src, data_dir=run.data_dir, out_dir=out, tmp_dir=tmp,
                  limits=policy.limits, env=env, gpu=True)
    hello = hello_for_baseline(
        "baseline.py", env_in_out={"FLASHINFER_WORKSPACE_BASE": "flashinfer-workspace"})
    try:
        ran = run_role(ctx.sandbox, job, hello, replace(run.plan, sampled={}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if ran.fault is not None:
        return None, f"flashinfer baseline failed during {ran.fault_phase}: " \
                     f"{ran.fault.message[:300]}"
    return ran, "flashinfer"


def gate(policy: Policy, cand: RoleRun, baselines: dict[str, RoleRun]
         ) -> tuple[list[Reason], dict[str, Any]]:
    """Speedups against every baseline; the promotion gate against the policy's chosen one."""
    return RegimeGate(policy.promotion).check(cand, baselines)


def extend_benchmark(ctx: EvaluationContext, run: Execution
                     ) -> tuple[list[Reason], dict[str, Any]]:
    """GPU additions to the benchmark stage: baselines, the regime gate, roofline position."""
    definition, policy, cand = ctx.definition, ctx.policy, run.cand
    if run.ref is None:
        raise InfrastructureError("baselines asked for before the reference ran")
    runs: dict[str, RoleRun] = {"reference": run.ref}
    notes: dict[str, str] = {}
    if "flashinfer" in policy.benchmark.baselines:
        fi, why = run_flashinfer(ctx, run, {**compile_cuda.gpu_env(), **ctx.lane.env()})
        if fi is not None:
            runs["flashinfer"] = fi
        else:
            notes["flashinfer"] = why
    reasons, details = gate(policy, cand, runs)
    if notes:
        details["baselines_unavailable"] = notes
    ceil = roofline.ceilings()
    for entry, bench in zip(details["regimes"], cand.benches, strict=True):
        med_ms = median(bench.times_s) * 1e3
        entry["roofline"] = roofline.position(definition, bench.case.axes, bench.case.payload,
                                              med_ms, ceil)
        odd = roofline.implausible(definition, bench.case.payload, med_ms, ceil,
                                   policy.benchmark.plausibility_margin)
        entry["roofline"]["plausible"] = odd is None
        if odd:
            reasons.append(Reason(code=ReasonCode.IMPLAUSIBLE_SPEED, stage=Stage.BENCHMARK,
                                  message=f"workload {bench.case.axes}: {odd}"))
    details["ceilings"] = ceil
    details["timing"] = ("per call, as triton.testing.do_bench: L2 flush (max(2x L2, 256 MB) "
                         "written), start event, call, end event on the current stream, then a "
                         "device-wide sync; work that ran off that stream raises the time (see "
                         "each workload's clock.method and worker/gputimer.py); outputs "
                         "poisoned, inputs fresh per call at addresses the candidate never saw")
    return reasons, details
