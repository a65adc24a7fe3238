"""What an agent is told about a verdict: the decision and the measurements, nothing more
(no host paths, logs or reference outputs)."""

from __future__ import annotations

import math
from typing import Any

from ..models import Stage, Verdict

__all__ = ["mean_latency_ms", "profile_of", "verdict_summary"]


def _workloads(verdict: Verdict) -> list[dict[str, Any]]:
    bench = verdict.stage(Stage.BENCHMARK)
    out = []
    for w in (bench.details.get("workloads") or []) if bench else []:
        cand, ref = w.get("candidate") or {}, w.get("reference") or {}
        out.append({"workload": w.get("workload"), "axes": w.get("axes"),
                    "latency_ms": cand.get("median_ms"), "mean_ms": cand.get("mean_ms"),
                    "reference_ms": ref.get("median_ms"), "speedup": w.get("speedup")})
    return out


def mean_latency_ms(verdict: Verdict) -> float | None:
    """Mean over the workloads of the candidate's median latency (None when not timed)."""
    xs = [w["latency_ms"] for w in _workloads(verdict)
          if isinstance(w["latency_ms"], (int, float)) and math.isfinite(w["latency_ms"])]
    return sum(xs) / len(xs) if xs else None


def profile_of(verdict: Verdict) -> dict[str, Any]:
    prof = verdict.stage(Stage.PROFILE)
    if prof is None:
        return {"status": "not run", "reason": "this evaluation had no profile stage"}
    return {"status": prof.status, "details": prof.details,
            "reasons": [r.message for r in prof.reasons]}


def verdict_summary(vid: str, verdict: Verdict) -> dict[str, Any]:
    bench = verdict.stage(Stage.BENCHMARK)
    prof = verdict.stage(Stage.PROFILE)
    return {
        "id": vid, "decision": verdict.decision,
        "candidate_sha256": verdict.candidate.sha256,
        "definition": verdict.definition.name,
        "reasons": [{"code": str(r.code), "stage": str(r.stage), "message": r.message}
                    for r in verdict.reasons],
        "stages": {str(s.stage): s.status for s in verdict.stages},
        "workloads": _workloads(verdict),
        "mean_latency_ms": mean_latency_ms(verdict),
        "speedup_geomean": bench.details.get("speedup_geomean") if bench else None,
        "clock": bench.details.get("clock") if bench else None,
        "signature": (prof.details.get("signatures") or prof.details) if prof is not None
        and prof.status == "passed" else None,
    }
