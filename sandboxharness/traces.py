"""Export a verdict as FlashInfer-Bench Trace lines: one per workload that was run, and for a
candidate rejected before anything ran (policy, static, compile), one per workload with the
status that stopped it, as FlashInfer-Bench records a solution that never ran."""

from __future__ import annotations

from typing import Any

from .models import Stage, Verdict, WorkloadTrace
from .models.trace import Correctness, Evaluation, EvaluationStatus, Performance, Trace, TraceEnvironment

_STATUS: dict[str, EvaluationStatus] = {
    "INCORRECT_SHAPE": "INCORRECT_SHAPE", "INCORRECT_DTYPE": "INCORRECT_DTYPE",
    "INCORRECT_NUMERICAL": "INCORRECT_NUMERICAL", "NONFINITE_OUTPUT": "INCORRECT_NUMERICAL",
    "INCORRECT_TYPE": "INCORRECT_NUMERICAL", "INPUT_MUTATED": "INCORRECT_NUMERICAL",
    "BENCH_OUTPUT_MISMATCH": "INCORRECT_NUMERICAL", "COMPILE_ERROR": "COMPILE_ERROR",
    "COMPILE_TIMEOUT": "TIMEOUT", "TIMEOUT": "TIMEOUT",
}


def _status(verdict: Verdict, trials: list[dict[str, Any]]) -> EvaluationStatus:
    failing = [t["status"] for t in trials if t["status"] != "PASSED"]
    if failing:
        return _STATUS.get(failing[0], "RUNTIME_ERROR")
    if verdict.decision == "promote":
        return "PASSED"
    code = verdict.reasons[0].code.value
    return _STATUS.get(code, "RUNTIME_ERROR")


def to_traces(verdict: Verdict, workloads: list[WorkloadTrace]) -> list[Trace]:
    env = TraceEnvironment(hardware=verdict.environment.device, libs={
        "torch": verdict.environment.torch, "triton": verdict.environment.triton or "",
        "sandboxharness": verdict.environment.harness_version,
        "sandboxharness.policy": verdict.policy.sha256})
    by_uuid = {w.workload.uuid: w for w in workloads}
    corr = verdict.stage(Stage.CORRECTNESS)
    bench = verdict.stage(Stage.BENCHMARK)
    perf_by = {w["workload"]: w for w in (bench.details.get("workloads", []) if bench else [])}
    log = "; ".join(f"{r.code.value}: {r.message}" for r in verdict.reasons)[:4000]
    cases = corr.details.get("cases", []) if corr else []
    if not cases and verdict.reasons:  # stopped before any call: every workload says why
        status = _STATUS.get(verdict.reasons[0].code.value, "RUNTIME_ERROR")
        if status == "INCORRECT_NUMERICAL":  # needs errors it never measured
            status = "RUNTIME_ERROR"
        return [Trace(definition=verdict.definition.name, workload=w.workload,
                      solution=verdict.candidate.name, evaluation=Evaluation(
                          status=status, environment=env, timestamp=verdict.finished_at,
                          log=log)) for w in workloads]
    traces = []
    for case in cases:
        wl = by_uuid.get(case["workload"])
        if wl is None:
            continue  # held-out sizes have no workload entry to attach to
        status = _status(verdict, case["trials"])
        correctness = performance = None
        if status in ("PASSED", "INCORRECT_NUMERICAL"):
            outs = [o for t in case["trials"] for o in t.get("outputs", {}).values()]
            correctness = Correctness(max_absolute_error=max((o["max_abs"] for o in outs), default=0),
                                      max_relative_error=max((o["max_rel"] for o in outs), default=0))
        perf = perf_by.get(case["workload"], {})
        flag = (perf.get("gpu_state") or {}).get("flag")  # NVML saw the window unsteady
        case_log = f"{log}; gpu: {flag}"[:4000] if flag else log
        if status == "PASSED":  # FIB: a PASSED evaluation always carries performance
            performance = Performance(
                latency_ms=perf.get("candidate", {}).get("median_ms", 0.0),
                reference_latency_ms=perf.get("reference", {}).get("median_ms", 0.0),
                speedup_factor=perf.get("speedup", 0.0))
        traces.append(Trace(definition=verdict.definition.name, workload=wl.workload,
                            solution=verdict.candidate.name, evaluation=Evaluation(
                                status=status, environment=env, timestamp=verdict.finished_at,
                                log=case_log, correctness=correctness, performance=performance)))
    return traces
