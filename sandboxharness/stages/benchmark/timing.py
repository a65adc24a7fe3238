"""Judge timings on the trusted side: statistics, clock cross-check, sampled output re-checks."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from ...models import Definition, Policy
from ...models.verdict import Reason, ReasonCode, Stage
from ...policy import CpuSpeedGate
from ...worker.protocol import CallReply
from .. import honesty
from ..call_judge import judge_call
from ..compare_modes import resolve
from ..correctness import judged
from ..execute import CallResult, RoleRun
from ..state import may_update_inputs

# The worker's times against the span the host saw between each timed call's ``ready`` and
# ``done`` frames. Host-side spans only ever run long (the worker preempted after a frame, a
# late wake-up of the host on a busy machine), so the *shortest* span stands for the call: it
# may exceed twice the median reported time by no more than a fixed allowance (the flush,
# events, frames, a scheduler slice). A clock that claims a fraction of the real time shows
# from about ten milliseconds per call up; no stall on some calls rejects an honest kernel.
SPAN_FACTOR = 2.0
SPAN_ALLOWANCE_S = 0.005


# Without per-call spans (a worker that sends none): the whole batch against the host's span
# of the request, with a fixed allowance for the round trip.
MIN_BATCH_SHARE = 0.5
ROUNDTRIP_ALLOWANCE_S = 0.1
PER_CALL_ALLOWANCE_S = 0.002


def batch_disagrees(reported: float, host_s: float, n: int) -> str | None:
    floor = MIN_BATCH_SHARE * host_s - (ROUNDTRIP_ALLOWANCE_S + PER_CALL_ALLOWANCE_S * n)
    return "reported far less in all than the host measured" if reported < floor else None


def clock_disagrees(times: list[float], spans: list[float]) -> str | None:
    """Why the worker's times cannot be true against the host's per-call spans, or None."""
    if len(spans) != len(times) or not times:
        return None
    t, s = statistics.median(times), min(spans)
    if s > SPAN_FACTOR * t + SPAN_ALLOWANCE_S:
        return (f"median timed call reported {t * 1e3:.3f} ms while the host saw even the "
                f"shortest take {s * 1e3:.3f} ms")
    return None


def summarize(times: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
    med = statistics.median(times)
    return {"median_ms": med * 1e3, "p25_ms": qs[0] * 1e3, "p75_ms": qs[2] * 1e3,
            "min_ms": min(times) * 1e3, "mean_ms": statistics.fmean(times) * 1e3,
            "dispersion": (qs[2] - qs[0]) / med if med > 0 else 0.0, "n": float(len(times))}


def judge(definition: Definition, policy: Policy, cand: RoleRun, ref: RoleRun, *,
          cand_dir: Path, ref_dir: Path, data_dir: str, device: str,
          language: str = "", own: list[str] | None = None
          ) -> tuple[list[Reason], dict[str, Any]]:
    reasons: list[Reason] = []
    per_workload: list[dict[str, Any]] = []
    ref_bench = {b.case.id: b for b in ref.benches}
    ref_calls = {(c.case.id, c.sampled_index): c for c in ref.calls
                 if c.sampled_index is not None}
    speedups: list[float] = []
    for bench in cand.benches:
        cs = summarize(bench.times_s)
        reported = sum(bench.times_s)
        spans = [c.host_span_s for c in bench.calls]
        why = ("reported more in all than the host measured"
               if reported > bench.host_elapsed_s else clock_disagrees(bench.times_s, spans)
               if spans else batch_disagrees(reported, bench.host_elapsed_s, len(bench.times_s)))
        if why:
            reasons.append(Reason(code=ReasonCode.TIMING_INCONSISTENT, stage=Stage.BENCHMARK,
                                  message=f"workload {bench.case.axes}: {why} (worker "
                                  f"{reported * 1e3:.3f} ms in all, host "
                                  f"{sum(spans) * 1e3:.3f} ms over the calls)"))
        rb_calls = ref_bench[bench.case.id].calls if bench.case.id in ref_bench else []
        reasons.extend(honesty.timed(language, bench, own, may_update_inputs(
            definition, resolve(definition, policy.correctness), rb_calls)))
        for idx, fname in bench.sampled.items():
            ref_call = ref_calls.get((bench.case.id, idx))
            if ref_call is None or ref_call.error is not None:
                continue
            cand_call = CallResult(bench.case, -1, bench.seeds[idx], file=fname,
                                   reply=CallReply(n_outputs=len(bench.case.payload["outputs"])),
                                   bound=bench.calls[idx].bound, sampled_index=idx)
            code, msg, _ = judged(ref_call) or judge_call(
                definition, policy, cand_call, ref_call, cand_dir=cand_dir, ref_dir=ref_dir,
                data_dir=data_dir)
            if code is not None:
                if code not in (ReasonCode.INTEGRITY_VIOLATION, ReasonCode.INPUT_MUTATED):
                    code = ReasonCode.BENCH_OUTPUT_MISMATCH
                reasons.append(Reason(code=code, stage=Stage.BENCHMARK,
                                      message=f"timed call #{idx} of workload {bench.case.axes}: "
                                      f"{msg}"))
                break
        entry: dict[str, Any] = {"workload": bench.case.workload, "axes": bench.case.axes,
                                 "candidate": cs, "host_elapsed_ms": bench.host_elapsed_s * 1e3,
                                 "sampled_checks": sorted(bench.sampled)}
        if bench.clock:
            entry["clock"] = bench.clock
        if bench.gpu_state:
            entry["gpu_state"] = bench.gpu_state
        if bench.retimed:
            entry["retimed"] = bench.retimed
        rb = ref_bench.get(bench.case.id)
        if rb is not None and rb.times_s:
            rs = summarize(rb.times_s)
            entry["reference"] = rs
            if cs["median_ms"] > 0:
                entry["speedup"] = rs["median_ms"] / cs["median_ms"]
                speedups.append(entry["speedup"])
        rules = policy.benchmark
        if rules.max_dispersion is not None and cs["dispersion"] > rules.max_dispersion:
            reasons.append(Reason(code=ReasonCode.TIMING_UNSTABLE, stage=Stage.BENCHMARK,
                                  message=f"workload {bench.case.axes}: dispersion "
                                  f"{cs['dispersion']:.2f} over {rules.max_dispersion}"))
        per_workload.append(entry)
    geo = math.exp(statistics.fmean(math.log(s) for s in speedups)) if speedups else None
    details: dict[str, Any] = {
        "clock": "wall-clock (CPU): not comparable with GPU timings" if device == "cpu"
        else next((b.clock["method"] for b in cand.benches if b.clock.get("method")),
                  "cuda-events"),
        "baseline": "reference", "workloads": per_workload, "speedup_geomean": geo,
    }
    # on GPU the gate is per regime and per repeat, against the chosen baseline (RegimeGate)
    if (slow := CpuSpeedGate(policy.promotion).check(geo, device)) is not None:
        reasons.append(slow)
    return reasons, details
