"""Judge timings on the trusted side: statistics, clock cross-check, sampled output re-checks."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from ..models import Definition, Policy
from ..models.verdict import Reason, ReasonCode, Stage
from .correctness import judge_call
from .execute import CallResult, RoleRun

# A timed call cannot take less than this share of the host-measured span of the timed batch,
# less a fixed allowance for the round trip; anything below means the clock was lied to.
MIN_REPORTED_SHARE = 0.5
# Generous on purpose: a scheduler stall on a busy machine must never reject an honest kernel;
# a clock that lies by orders of magnitude still shows (and the worker's clock is snapshotted).
ROUNDTRIP_ALLOWANCE_S = 0.1
PER_CALL_ALLOWANCE_S = 0.002


def summarize(times: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
    med = statistics.median(times)
    return {"median_ms": med * 1e3, "p25_ms": qs[0] * 1e3, "p75_ms": qs[2] * 1e3,
            "min_ms": min(times) * 1e3, "mean_ms": statistics.fmean(times) * 1e3,
            "dispersion": (qs[2] - qs[0]) / med if med > 0 else 0.0, "n": float(len(times))}


def judge(definition: Definition, policy: Policy, cand: RoleRun, ref: RoleRun, cand_dir: Path,
          ref_dir: Path, data_dir: str, device: str) -> tuple[list[Reason], dict[str, Any]]:
    reasons: list[Reason] = []
    per_workload: list[dict[str, Any]] = []
    ref_bench = {b.case.id: b for b in ref.benches}
    ref_calls = {(c.case.id, c.trial): c for c in ref.calls}
    speedups: list[float] = []
    for bench in cand.benches:
        cs = summarize(bench.times_s)
        reported = sum(bench.times_s)
        floor = MIN_REPORTED_SHARE * bench.host_elapsed_s - (
            ROUNDTRIP_ALLOWANCE_S + PER_CALL_ALLOWANCE_S * len(bench.times_s))
        if reported > bench.host_elapsed_s or reported < floor:
            reasons.append(Reason(code=ReasonCode.TIMING_INCONSISTENT, stage=Stage.BENCHMARK,
                                  message=f"workload {bench.case.axes}: worker reported "
                                  f"{reported * 1e3:.3f} ms in all, host measured "
                                  f"{bench.host_elapsed_s * 1e3:.3f} ms"))
        for idx, fname in bench.sampled.items():
            ref_call = ref_calls.get((bench.case.id, 1000 + idx))
            if ref_call is None or ref_call.error is not None:
                continue
            cand_call = CallResult(bench.case, 1000 + idx, bench.seeds[idx], file=fname,
                                   reply={"n_outputs": len(bench.case.payload["outputs"])})
            code, msg, _ = judge_call(definition, policy, cand_call, cand_dir, ref_call, ref_dir,
                                      data_dir, check_inputs=False)
            if code is not None:
                reasons.append(Reason(code=ReasonCode.BENCH_OUTPUT_MISMATCH,
                                      stage=Stage.BENCHMARK,
                                      message=f"timed call #{idx} of workload {bench.case.axes}: "
                                      f"{msg}"))
                break
        entry: dict[str, Any] = {"workload": bench.case.workload, "axes": bench.case.axes,
                                 "candidate": cs, "host_elapsed_ms": bench.host_elapsed_s * 1e3,
                                 "sampled_checks": sorted(bench.sampled)}
        if bench.clock:
            entry["clock"] = bench.clock
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
    promo = policy.promotion
    # on GPU the gate is per regime and per repeat, against the chosen baseline (baselines.gate)
    gate = promo.min_speedup is not None and device == "cpu" and promo.gate_speed_on_cpu
    if gate and geo is not None and promo.min_speedup is not None and geo < promo.min_speedup:
        reasons.append(Reason(code=ReasonCode.SLOWER_THAN_BASELINE, stage=Stage.BENCHMARK,
                              message=f"speedup {geo:.3f}x under the required "
                              f"{promo.min_speedup}x"))
    return reasons, details
