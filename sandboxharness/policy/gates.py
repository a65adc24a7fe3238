"""The promotion gates: required stages, the CPU speed gate, the GPU regime/repeat gate.

Each gate is a small object built from the policy with one ``check``; the timings it reads
are anything shaped like the benchmark's results (``Run``), so this package needs none of
the stages' code.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..models import Reason, ReasonCode, Stage, StageResult
from ..models.policy import Promotion

__all__ = ["CpuSpeedGate", "RegimeGate", "RequiredStages", "Run", "blocks", "median"]


class _Case(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def workload(self) -> str: ...
    @property
    def axes(self) -> dict[str, int]: ...


class _Timed(Protocol):
    @property
    def case(self) -> _Case: ...
    @property
    def times_s(self) -> list[float]: ...


class Run(Protocol):
    """One role's timed calls, per workload (``stages.execute.RoleRun``)."""

    @property
    def benches(self) -> Sequence[_Timed]: ...


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def blocks(times: list[float], k: int) -> list[float]:
    """Medians of ``k`` consecutive blocks of the timed calls (one per repeat)."""
    k = max(1, min(k, len(times)))
    size = len(times) // k
    return [median(times[i * size:(i + 1) * size if i < k - 1 else len(times)])
            for i in range(k)]


@dataclass(frozen=True)
class RequiredStages:
    """Every stage the policy requires must have passed (skipped is not passed)."""

    required: Sequence[str]

    def check(self, stages: Sequence[StageResult]) -> list[Reason]:
        reasons = []
        by_stage = {s.stage.value: s for s in stages}
        for name in self.required:
            st = by_stage.get(name)
            if st is None or st.status != "passed":
                why = st.details.get("reason", "not run") if st else "not run"
                reasons.append(Reason(code=ReasonCode.STAGE_NOT_RUN, stage=Stage.PROMOTION,
                                      message=f"required stage {name!r} did not pass: {why}"))
        return reasons


@dataclass(frozen=True)
class CpuSpeedGate:
    """On CPU, only when the policy asks (``gate_speed_on_cpu``): the geometric-mean speedup
    over the reference must reach ``min_speedup``. Wall clock on a CPU is not comparable with
    GPU timing, so by default it never gates; on a GPU ``RegimeGate`` does."""

    promotion: Promotion

    def check(self, speedup_geomean: float | None, device: str) -> Reason | None:
        need = self.promotion.min_speedup
        if need is None or device != "cpu" or not self.promotion.gate_speed_on_cpu:
            return None
        if speedup_geomean is None or not speedup_geomean < need:  # NaN never gates
            return None
        return Reason(code=ReasonCode.SLOWER_THAN_BASELINE, stage=Stage.BENCHMARK,
                      message=f"speedup {speedup_geomean:.3f}x under the required {need}x")


@dataclass(frozen=True)
class RegimeGate:
    """GPU: a regime is one workload. It passes when the candidate's median beats
    ``baseline_median * min_speedup`` in each of ``min_repeats`` independent repeats
    (consecutive blocks of its timed calls, each judged by its own median). Promotion needs
    every regime to pass; a win on some regimes only is recorded as ``archive_only`` and
    rejects (SLOWER_THAN_BASELINE). The details also give the speedup against every baseline.
    """

    promotion: Promotion

    def check(self, cand: Run, baselines: Mapping[str, Run]
              ) -> tuple[list[Reason], dict[str, Any]]:
        promo = self.promotion
        chosen = promo.baseline
        per = [self._regime(bench, baselines) for bench in cand.benches]
        details: dict[str, Any] = {"baselines": sorted(baselines), "gate_baseline": chosen,
                                   "regimes": per}
        reasons: list[Reason] = []
        if promo.min_speedup is None:
            return reasons, details
        if chosen not in baselines:
            reasons.append(Reason(code=ReasonCode.STAGE_NOT_RUN, stage=Stage.BENCHMARK,
                                  message=f"the policy gates on the {chosen} baseline, which "
                                  "could not be timed here"))
            return reasons, details
        passed = [e for e in per if e.get("passed")]
        details["archive_only"] = bool(passed) and len(passed) < len(per)
        if len(passed) < len(per):
            worst = min((e for e in per if not e.get("passed")),
                        key=lambda e: min((s for s in e.get("repeats_speedup") or [0.0]
                                           if s is not None), default=0.0))
            shown = [round(s, 3) for s in worst.get("repeats_speedup") or [] if s is not None]
            reasons.append(Reason(
                code=ReasonCode.SLOWER_THAN_BASELINE, stage=Stage.BENCHMARK,
                message=f"{len(passed)}/{len(per)} regimes beat {chosen} x{promo.min_speedup} "
                f"in all {promo.min_repeats} repeats; worst {worst['axes']}: {shown}"
                + (" (a regime win: archived only, not promoted)" if passed else "")))
        return reasons, details

    def _regime(self, bench: _Timed, baselines: Mapping[str, Run]) -> dict[str, Any]:
        promo = self.promotion
        entry: dict[str, Any] = {"workload": bench.case.workload, "axes": bench.case.axes}
        cmed = median(bench.times_s)
        for name, run in baselines.items():
            match = _same_case(run, bench)
            if match is not None and match.times_s and cmed > 0:
                entry[f"speedup_vs_{name}"] = median(match.times_s) / cmed
                entry[f"{name}_median_ms"] = median(match.times_s) * 1e3
        base = _same_case(baselines[promo.baseline], bench) if promo.baseline in baselines \
            else None
        if promo.min_speedup is not None and base is not None and base.times_s:
            target = median(base.times_s) / promo.min_speedup
            reps = blocks(bench.times_s, promo.min_repeats)
            entry["repeats_speedup"] = [median(base.times_s) / r if r > 0 else None
                                        for r in reps]
            entry["passed"] = len(reps) >= promo.min_repeats and all(r <= target for r in reps)
        return entry


def _same_case(run: Run, bench: _Timed) -> _Timed | None:
    return next((b for b in run.benches if b.case.id == bench.case.id), None)
