"""Campaign promotion rules: what one optimisation round may conclude, from the harness's own
measurements.

The evidence (``Sweep``) is built by the campaign controller from harness verdicts only; a
generator's or an agent's claims about speed or correctness are never an input here. Each rule
is a small gate with one ``check``; :func:`decide_round` turns them into exactly one of
``archive`` (a win on some regimes only), ``promote`` (global) or ``reject`` (restore the best).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from ..models._base import FiniteModel, FrozenModel

__all__ = ["BoundaryReplay", "CampaignRules", "EnoughRepeats", "EveryRegimeCorrect", "GateResult",
           "LowerMean", "NoRegimeSlower", "OfficialParity", "ParityRules", "RegimeRules",
           "RoundDecision", "RoundEvidence", "RoundVerdict", "SupervisorRules", "Sweep",
           "decide_round", "mean_ms", "promotable", "regime_wins"]

RoundVerdict = Literal["archive", "promote", "reject"]


class RegimeRules(FiniteModel):
    large_definition: int = Field(default=40, ge=1)
    """More workloads than this: rounds screen on representative regimes before a full sweep."""
    screening_regimes: int = Field(default=3, ge=1, le=16)
    """Regimes screened on a large definition (the heaviest; explicit ones first)."""
    max_bins_per_axis: int = Field(default=3, ge=1, le=16)
    """Value groups per variable axis (split at the widest gaps on a log scale)."""
    explicit_share: float = Field(default=1 / 3, gt=0, le=1)
    """A regime (or single workload) carrying this share of the total latency stays explicit."""


class ParityRules(FrozenModel):
    """The official setting a promotion must have been measured in."""

    backends: list[Literal["process", "docker"]] = Field(
        default_factory=lambda: list[Literal["process", "docker"]](["process", "docker"]))
    sanitizer: bool = True
    """compute-sanitizer must have run and passed on the candidate."""
    clock_state: bool = True
    """The GPU's clocks, power and throttle state must be recorded with every timing window."""


class SupervisorRules(FiniteModel):
    stall_rounds: int = Field(default=3, ge=1)
    """Rounds without a gain above the noise floor before escalating."""
    plateau_rounds: int = Field(default=3, ge=2)
    plateau_gain: float = Field(default=0.01, ge=0, le=1)
    """The last ``plateau_rounds`` promotions each gained less than this share: stop."""
    cycle_repeats: int = Field(default=2, ge=1)
    """A hypothesis picked this many times in a row, or a round of only repeated candidates."""
    regression_factor: float = Field(default=3.0, ge=1)
    """The best measured slower than its recorded mean by this many noise floors: escalate."""
    block_after_rejects: int = Field(default=2, ge=1)
    """A direction rejected this many times is blocked."""
    max_gpu_seconds: float | None = Field(default=None, gt=0)
    max_wall_s: float | None = Field(default=None, gt=0)


class CampaignRules(FiniteModel):
    """The numbers of the campaign policy (a YAML mapping with these fields)."""

    candidates_per_round: int = Field(default=4, ge=1, le=64)
    min_repeats: int = Field(default=2, ge=2, le=32)
    """Full paired sweeps a promotion needs (never fewer than two)."""
    noise_floor_min: float = Field(default=0.01, ge=0, le=1)
    """Relative noise floor used when the repeats measured less."""
    boundary_trials: int = Field(default=100, ge=1, le=100_000)
    """Correctness trials of the final replay of boundary shapes (a 1.5% per-trial failure is
    caught 4.4% of the time with 3 trials, 78% with 100)."""
    parity: ParityRules = ParityRules()
    regimes: RegimeRules = RegimeRules()
    supervisor: SupervisorRules = SupervisorRules()

    def in_words(self) -> list[str]:
        p = self.parity
        return [
            "A win on some regimes only is archived, never promoted.",
            "Global promotion needs every regime correct on every repeat, no regime slower "
            "than the current best beyond the measured noise floor, and a lower full-sweep "
            "mean latency than the current best's mean, measured side by side in the round.",
            f"At least {self.min_repeats} full repeats, then a replay of the boundary shapes "
            f"at {self.boundary_trials} correctness trials.",
            f"Official parity: a GPU run on backend {'/'.join(p.backends)}"
            + (", compute-sanitizer passed" if p.sanitizer else "")
            + (", GPU clock state recorded" if p.clock_state else "") + ".",
            "The harness measures every number itself; what a generator says is not read.",
            "Each round ends in exactly one verdict: archive, promote or reject (best kept).",
        ]


class Sweep(FiniteModel):
    """One solution measured once by the harness (one verdict)."""

    verdict_sha256: str
    correct: bool
    """Every required stage passed and no correctness or honesty reason was raised."""
    latency_ms: dict[str, float]
    """Workload uuid -> the harness's median latency."""
    device: str
    backend: str
    sanitizer_passed: bool
    clock_recorded: bool
    trials: int = Field(ge=0)


class RoundEvidence(FiniteModel):
    regimes: dict[str, list[str]]
    """Regime name -> workload uuids (the full sweep is their union)."""
    candidate: list[Sweep]
    """The round's leader, every repeat (the first may be a screening sweep)."""
    best: list[Sweep]
    """The current best, measured in the same sweeps (paired)."""
    noise_floor: float = Field(ge=0)
    boundary: list[Sweep] = Field(default_factory=list)
    boundary_workloads: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class GateResult:
    name: str
    passed: bool
    message: str


def mean_ms(sweeps: Sequence[Sweep], uuids: Sequence[str]) -> float | None:
    """Mean over repeats of the mean latency over ``uuids``; None if a repeat lacks one."""
    per = []
    for s in sweeps:
        vals = [s.latency_ms.get(u) for u in uuids]
        if not vals or any(v is None for v in vals):
            return None
        per.append(statistics.fmean(v for v in vals if v is not None))
    return statistics.fmean(per) if per else None


def _full(e: RoundEvidence) -> list[str]:
    return [u for uuids in e.regimes.values() for u in uuids]


def _full_sweeps(sweeps: Sequence[Sweep], e: RoundEvidence) -> list[Sweep]:
    need = set(_full(e))
    return [s for s in sweeps if need <= set(s.latency_ms)]


def regime_wins(e: RoundEvidence) -> list[str]:
    """Regimes where the (correct) leader beats the paired best beyond the noise floor."""
    if not e.candidate or not all(s.correct for s in e.candidate):
        return []
    wins = []
    for name, uuids in e.regimes.items():
        c, b = mean_ms(e.candidate, uuids), mean_ms(e.best, uuids)
        if c is not None and b is not None and c < b * (1 - e.noise_floor):
            wins.append(name)
    return wins


@dataclass(frozen=True)
class EveryRegimeCorrect:
    def check(self, e: RoundEvidence, rules: CampaignRules) -> GateResult:
        bad = sum(not s.correct for s in e.candidate)
        ok = bool(e.candidate) and bad == 0
        return GateResult("every_regime_correct", ok,
                          f"correct in all {len(e.candidate)} repeats" if ok
                          else f"incorrect in {bad} of {len(e.candidate)} repeats")


@dataclass(frozen=True)
class NoRegimeSlower:
    def check(self, e: RoundEvidence, rules: CampaignRules) -> GateResult:
        slower = []
        for name, uuids in e.regimes.items():
            c, b = mean_ms(e.candidate, uuids), mean_ms(e.best, uuids)
            if c is None or b is None:
                slower.append(f"{name} (not measured)")
            elif c > b * (1 + e.noise_floor):
                slower.append(f"{name} ({c:.4g} ms vs {b:.4g} ms)")
        return GateResult("no_regime_slower", not slower,
                          f"no regime slower than the best beyond the noise floor "
                          f"{e.noise_floor:.1%}" if not slower
                          else "slower beyond the noise floor: " + ", ".join(slower))


@dataclass(frozen=True)
class LowerMean:
    def check(self, e: RoundEvidence, rules: CampaignRules) -> GateResult:
        full = _full(e)
        c = mean_ms(_full_sweeps(e.candidate, e), full)
        b = mean_ms(_full_sweeps(e.best, e), full)
        if c is None or b is None:
            return GateResult("lower_mean", False, "no full sweep of both candidate and best")
        ok = c < b * (1 - e.noise_floor)
        return GateResult("lower_mean", ok, f"full-sweep mean {c:.4g} ms vs best {b:.4g} ms "
                          f"(must be lower beyond the noise floor {e.noise_floor:.1%})")


@dataclass(frozen=True)
class EnoughRepeats:
    def check(self, e: RoundEvidence, rules: CampaignRules) -> GateResult:
        n = min(len(_full_sweeps(e.candidate, e)), len(_full_sweeps(e.best, e)))
        return GateResult("repeats", n >= rules.min_repeats,
                          f"{n} full paired repeats (needs {rules.min_repeats})")


@dataclass(frozen=True)
class BoundaryReplay:
    def check(self, e: RoundEvidence, rules: CampaignRules) -> GateResult:
        covered = {u for s in e.boundary for u in s.latency_ms}
        ok = (bool(e.boundary) and bool(e.boundary_workloads)
              and all(s.correct and s.trials >= rules.boundary_trials for s in e.boundary)
              and set(e.boundary_workloads) <= covered)
        return GateResult("boundary_replay", ok,
                          f"boundary shapes {len(e.boundary_workloads)} replayed at "
                          f"{min((s.trials for s in e.boundary), default=0)} trials "
                          f"(needs {rules.boundary_trials}), "
                          + ("all correct" if ok else "not passed"))


@dataclass(frozen=True)
class OfficialParity:
    def check(self, e: RoundEvidence, rules: CampaignRules) -> GateResult:
        p = rules.parity
        sweeps = [*e.candidate, *e.boundary]
        if not sweeps:
            return GateResult("official_parity", False, "not met: nothing measured")
        if any(s.device == "cpu" for s in sweeps):
            return GateResult("official_parity", False, "not met: measured on the CPU "
                              "(wall-clock timing, no compute-sanitizer, no GPU clock state); "
                              "official parity needs a GPU run")
        missing = []
        if any(s.backend not in p.backends for s in sweeps):
            missing.append(f"backend not in {p.backends}")
        if p.sanitizer and not all(s.sanitizer_passed for s in sweeps):
            missing.append("compute-sanitizer did not run and pass")
        if p.clock_state and not all(s.clock_recorded for s in e.candidate):
            missing.append("GPU clock state not recorded")
        return GateResult("official_parity", not missing,
                          "met: " + sweeps[0].device if not missing
                          else "not met: " + "; ".join(missing))


PROMOTION_GATES = (EveryRegimeCorrect(), NoRegimeSlower(), LowerMean(), EnoughRepeats(),
                   BoundaryReplay(), OfficialParity())


def promotable(e: RoundEvidence, rules: CampaignRules) -> bool:
    """The measured gates hold (correct, no regime slower, lower mean, repeats): worth the
    high-trial boundary replay that completes the evidence."""
    return all(g.check(e, rules).passed for g in PROMOTION_GATES[:4])


@dataclass(frozen=True)
class RoundDecision:
    verdict: RoundVerdict
    why: str
    gates: list[GateResult]
    wins: list[str]


def decide_round(e: RoundEvidence | None, rules: CampaignRules) -> RoundDecision:
    """Exactly one verdict for a round, from the harness's measurements alone."""
    if e is None or not e.candidate:
        return RoundDecision("reject", "no candidate was measured correct", [], [])
    gates = [g.check(e, rules) for g in PROMOTION_GATES]
    wins = regime_wins(e)
    if all(g.passed for g in gates):
        return RoundDecision("promote", "every promotion rule holds", gates, wins)
    failed = "; ".join(f"{g.name}: {g.message}" for g in gates if not g.passed)
    if wins:
        return RoundDecision("archive", f"a win on {', '.join(wins)}, not promoted: {failed}",
                             gates, wins)
    return RoundDecision("reject", f"no win beyond the noise floor: {failed}", gates, wins)
