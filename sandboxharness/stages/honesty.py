"""Checks that hold every call to what it did at the moment it returned (trusted side).

Each call's outputs and post-call inputs were digested and sent on the channel right after it
returned (``worker.binding``). Here the host holds the rest of the run against those digests:
outputs that changed after later calls (a reused arena, a finalizer, deferred work), inputs
changed by a timed call, and calls that launched none of the declared language's kernels.
"""

from __future__ import annotations

import re

from ..models.solution import Solution
from ..models.verdict import Reason, ReasonCode, Stage
from .execute import BenchResult, RoleRun

COUNTED_LANGUAGES = ("triton",)
"""Languages whose kernel launches the worker counts (Triton's launch hook / interpreter)."""


_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?"
                     r"(?:inline\s+)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)")


def own_kernels(solution: Solution) -> list[str]:
    """``__global__`` function names in a CUDA solution's sources (trusted side)."""
    names: list[str] = []
    for src in solution.sources:
        names.extend(m.group(1) for m in _GLOBAL.finditer(src.content))
    return sorted(set(names))


def _reason(code: ReasonCode, stage: Stage, message: str) -> Reason:
    return Reason(code=code, stage=stage, message=message)


def rebound(cand: RoleRun) -> list[Reason]:
    """Correctness calls whose outputs no longer match their digest after all the calls."""
    for call in cand.calls:
        if call.file is None or call.sampled_index is not None or "out" not in call.bound:
            continue
        now = cand.rechecked.get(call.file.name)
        if now is None:
            return [_reason(ReasonCode.WORKER_PROTOCOL, Stage.CORRECTNESS,
                            f"no re-check digest for workload {call.case.axes}")]
        if now != call.bound["out"]:
            return [_reason(ReasonCode.INTEGRITY_VIOLATION, Stage.CORRECTNESS,
                            f"outputs of workload {call.case.axes} (trial {call.trial}) changed "
                            "after later calls: they alias storage the candidate reuses or "
                            "rewrites after returning")]
    return []


def launches(language: str, cand: RoleRun) -> list[Reason]:
    """A ``triton`` solution must launch a Triton kernel in every call it answers."""
    if language not in COUNTED_LANGUAGES:
        return []
    for call in cand.calls:
        if call.error is None and call.launches == 0 and _nonempty(call.case.payload):
            return [_reason(ReasonCode.LANGUAGE_NOT_USED, Stage.CORRECTNESS,
                            f"workload {call.case.axes}: the call launched no {language} "
                            "kernel (its work was done some other way)")]
    return []


def _nonempty(payload: dict[str, object]) -> bool:
    """A call with an empty output has nothing a kernel must compute."""
    outs = payload.get("outputs")
    if not isinstance(outs, list):
        return True
    for o in outs:
        shape = o.get("shape") if isinstance(o, dict) else None
        if isinstance(shape, list) and all(isinstance(d, int) for d in shape) and 0 in shape:
            return False
    return True


def timed(language: str, bench: BenchResult, own: list[str] | None = None,
          may_mutate: bool = False) -> list[Reason]:
    """Every timed call: inputs unchanged, outputs unchanged by later calls, the declared
    language used (a CUDA solution launches one of its own ``own`` kernels, where CUPTI names
    them); the sampled calls' files are exactly what was bound."""
    where = f"workload {bench.case.axes}"
    for i, call in enumerate(bench.calls):
        if call.bound.get("in") != call.pre_in and not may_mutate:  # state: stages.state
            return [_reason(ReasonCode.INPUT_MUTATED, Stage.BENCHMARK,
                            f"{where}: timed call #{i} modified its inputs")]
        if call.re_out != call.bound.get("out"):
            return [_reason(ReasonCode.INTEGRITY_VIOLATION, Stage.BENCHMARK,
                            f"{where}: outputs of timed call #{i} changed after it returned "
                            "(deferred work, a reused buffer, or a rewrite)")]
        for d in call.described:
            if isinstance(d, dict) and d.get("type") != "torch.Tensor":
                return [_reason(ReasonCode.INCORRECT_TYPE, Stage.BENCHMARK,
                                f"{where}: timed call #{i} returned a {d.get('type')}")]
        if language in COUNTED_LANGUAGES and call.launches == 0 and _nonempty(
                bench.case.payload):
            return [_reason(ReasonCode.LANGUAGE_NOT_USED, Stage.BENCHMARK,
                            f"{where}: timed call #{i} launched no {language} kernel")]
        if own and call.kernels is not None and _nonempty(bench.case.payload) and not any(
                name in k for k in call.kernels for name in own):
            return [_reason(ReasonCode.LANGUAGE_NOT_USED, Stage.BENCHMARK,
                            f"{where}: timed call #{i} launched none of the solution's own "
                            f"kernels ({', '.join(own[:4])}); it ran {call.kernels[:4]}")]
    for i, dumped in bench.dumped.items():
        if dumped != bench.calls[i].bound:
            return [_reason(ReasonCode.INTEGRITY_VIOLATION, Stage.BENCHMARK,
                            f"{where}: results of timed call #{i} changed before they were "
                            "saved")]
    return []
