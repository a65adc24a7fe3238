"""One campaign round, and the baseline before the first.

A round picks one direction, renders the task bundle (archived, its hash recorded), asks the
generator for at most ``k`` candidates, admits the new ones (re-validated, deduplicated
against the trajectory), screens them side by side with the current best (paired, same
round), confirms the leader over full repeats and replays its boundary shapes at a high trial
count when a promotion is possible, and ends in exactly one verdict from
:func:`~sandboxharness.policy.campaign.decide_round`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..errors import InfrastructureError
from ..generators.interface import Generator, GeneratorError
from ..models import Solution
from ..models.policy import Policy
from ..policy.campaign import RoundEvidence, Sweep, decide_round, mean_ms, promotable, regime_wins
from ..stages.cases import derive_seed
from .directions import Catalogue, Direction, pick_direction
from .measure import Measured, SweepSetup, per_regime, run_sweep
from .regimes import boundary_workloads, build_regimes
from .state import CampaignState, candidate_key, write_atomic
from .view import View, fold

__all__ = ["Controller", "noise_sample"]


def noise_sample(sweeps: Sequence[Sweep], uuids: Sequence[str]) -> list[float]:
    """Relative spread of full-sweep means over repeats of one solution (one sample)."""
    means = [m for s in sweeps if (m := mean_ms([s], uuids)) is not None]
    if len(means) < 2:
        return []
    return [(max(means) - min(means)) / statistics.fmean(means)]


@dataclass
class Controller:
    state: CampaignState
    setup: SweepSetup
    policy: Policy
    catalogue: Catalogue
    generator: Generator
    seed: int
    skills: Any = None
    """A SkillSet (``relevant(op_type, definition, direction)``), or None."""
    say: Callable[[str], None] = field(default=lambda _line: None)

    # --- baseline ---------------------------------------------------------------------------
    def baseline(self, view: View) -> None:
        """Two full sweeps of the starting solution: regimes, best mean, first noise sample."""
        t0 = time.monotonic()
        start = self.state.load_solution(view.best_key)
        every = [w.workload.uuid for w in self.setup.workloads]
        sweeps, verdicts, dev = [], [], 0.0
        signatures: dict[str, dict[str, Any]] = {}
        for rep in range(2):
            m = self._sweep([start], every, ("baseline", rep), f"baseline-{rep + 1}",
                            profile=rep == 0)  # one profile of the start is its signature
            sw = m.sweeps.get(view.best_key)
            if sw is None or not sw.correct:
                raise InfrastructureError(
                    "the starting solution is not correct on this definition's workloads "
                    f"({m.errors.get(view.best_key) or 'rejected, see the audit log'}); a "
                    "campaign starts from a correct solution")
            sweeps.append(sw)
            verdicts.append(m.verdicts[view.best_key])
            dev += m.device_s
            signatures |= m.signatures.get(view.best_key, {})
        latency = {u: statistics.fmean(s.latency_ms[u] for s in sweeps) for u in every
                   if all(u in s.latency_ms for s in sweeps)}
        matrix = build_regimes(self.setup.definition, self.setup.workloads, latency,
                               view.rules.regimes)
        regime_ms = {r.name: mean_ms(sweeps, r.workloads) for r in matrix.regimes}
        sigs = per_regime(matrix, signatures)
        self.state.append("baseline", {
            "regimes": matrix.model_dump(mode="json"), "best_key": view.best_key,
            "best_mean_ms": mean_ms(sweeps, every), "best_regime_ms": regime_ms,
            "noise_samples": noise_sample(sweeps, every), "verdicts": verdicts,
            "boundary": boundary_workloads(matrix, self.setup.workloads), "signatures": sigs,
            "device_s": dev, "wall_s": time.monotonic() - t0})
        self.say(f"baseline: {len(matrix.regimes)} regime(s), full-sweep mean "
                 f"{mean_ms(sweeps, every):.4g} ms")

    # --- one round --------------------------------------------------------------------------
    def choose(self, view: View) -> Direction | None:
        sig = self._heaviest_signature(view)
        last_gained = bool(view.rounds) and view.rounds[-1]["verdict"] != "reject"
        return pick_direction(self.catalogue, (sig or {}).get("bottleneck"),
                              (sig or {}).get("limiter"), status=view.status,
                              recent=view.recent, last_gained=last_gained)

    def round(self, n: int, direction: Direction) -> dict[str, Any]:
        from ..loop.bundle import build_task_bundle

        view = fold(self.state)
        t0 = time.monotonic()
        best = self.state.load_solution(view.best_key)
        d = self.setup.definition
        sig = self._heaviest_signature(view)
        skills = (self.skills.relevant(d.op_type, d.name, direction.id)
                  if self.skills is not None else [])
        bundle = build_task_bundle(d, self.policy, best=best, signatures=_signatures(view),
                                   direction=direction.for_bundle((sig or {}).get("limiter")),
                                   skills=skills, round=n,
                                   promotion_rules=view.rules.in_words())
        folder = self.state.root / "bundles"
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / f"round-{n}.json", bundle.model_dump_json(indent=1).encode())
        self.state.append("round_started", {"round": n, "direction": direction.for_bundle(None),
                                            "bundle_sha256": bundle.sha256})
        body: dict[str, Any] = {"round": n, "direction": direction.for_bundle(None),
                                "hypothesis": direction.hypothesis,
                                "bundle_sha256": bundle.sha256, "notes": []}
        remember = getattr(self.generator, "seen", None)
        if callable(remember):
            remember(set(view.seen))
        try:
            raw = self.generator.propose(bundle, view.rules.candidates_per_round)
        except GeneratorError as exc:
            body["notes"].append(f"generator failed: {exc}")
            raw = []
        cands, repeated = self._admit(raw, view, body["notes"])
        body["repeated"] = repeated
        body |= self._evaluate(n, view, best, cands)
        body["wall_s"] = time.monotonic() - t0
        self.state.append("round", body)
        return body

    def _admit(self, raw: Sequence[object], view: View, notes: list[str]
               ) -> tuple[list[Solution], int]:
        """Candidates re-validated from their JSON (a generator's extra fields or objects of
        its own making are refused), for this definition, new, at most k."""
        out: list[Solution] = []
        keys: set[str] = set()
        repeated = 0
        for i, item in enumerate(list(raw)[:view.rules.candidates_per_round * 4]):
            try:
                data = item.model_dump(mode="json") if isinstance(item, Solution) else item
                sol = Solution.model_validate(data)
            except (ValidationError, TypeError, ValueError) as exc:
                notes.append(f"candidate {i}: not a valid Solution: {str(exc).splitlines()[0]}")
                continue
            if sol.definition != self.setup.definition.name:
                notes.append(f"candidate {i}: for definition {sol.definition!r}, refused")
                continue
            key = candidate_key(sol)
            if key in view.seen or key == view.best_key or key in keys:
                repeated += 1
                continue
            keys.add(key)
            self.state.store_solution(sol)
            out.append(sol)
        return out[:view.rules.candidates_per_round], repeated

    def _evaluate(self, n: int, view: View, best: Solution, cands: list[Solution]
                  ) -> dict[str, Any]:
        matrix = view.regimes
        assert matrix is not None  # noqa: S101  the baseline ran first (campaign.run)
        rules, noise = view.rules, view.noise_floor
        every = matrix.all_workloads()
        out: dict[str, Any] = {"candidates": [], "device_s": 0.0, "noise_samples": []}
        if not cands:
            return out | self._verdict(decide_round(None, rules), view, None, None)
        screen = matrix.screening_workloads()
        m = self._sweep([best, *cands], screen, (n, 1), f"round-{n}-1")
        out["device_s"] += m.device_s
        for sol in cands:
            key = candidate_key(sol)
            sw = m.sweeps.get(key)
            out["candidates"].append({
                "key": key, "name": sol.name, "correct": bool(sw and sw.correct),
                "screen_mean_ms": mean_ms([sw], screen) if sw else None,
                "verdict": m.verdicts.get(key), "error": m.errors.get(key)})
        best_sw = m.sweeps.get(view.best_key)
        correct = [c for c in out["candidates"] if c["correct"] and c["screen_mean_ms"]]
        if best_sw is None or not correct:
            if best_sw is None or not best_sw.correct:
                out["best_failed"] = True
            return out | self._verdict(decide_round(None, rules), view, None, None)
        lead = min(correct, key=lambda c: c["screen_mean_ms"])["key"]
        cand_sw, best_sws = [m.sweeps[lead]], [best_sw]
        groups = ({r.name: r.workloads for r in matrix.regimes} if matrix.is_full(screen)
                  else {r.name: [r.representative] for r in matrix.regimes
                        if r.name in matrix.screening})
        ev = RoundEvidence(regimes=groups, candidate=cand_sw, best=best_sws, noise_floor=noise)
        if regime_wins(ev):  # worth confirming: full paired repeats, then the boundary replay
            done = 1 if matrix.is_full(screen) else 0
            leader = next(c for c in cands if candidate_key(c) == lead)
            for rep in range(done, rules.min_repeats):
                mr = self._sweep([best, leader], every, (n, rep + 1), f"round-{n}-full{rep + 1}",
                                 profile=True)  # the leader's signatures, read on promotion
                out["device_s"] += mr.device_s
                if lead in mr.sweeps:
                    cand_sw.append(mr.sweeps[lead])
                    out["leader_signatures"] = per_regime(matrix, mr.signatures.get(lead, {}))
                if view.best_key in mr.sweeps:
                    best_sws.append(mr.sweeps[view.best_key])
            ev = RoundEvidence(regimes=matrix.by_name(), candidate=cand_sw, best=best_sws,
                               noise_floor=noise)
            full_best = [s for s in best_sws if matrix.is_full(list(s.latency_ms))]
            out["noise_samples"] = noise_sample(full_best, every)
            out["paired_best_mean_ms"] = mean_ms(full_best, every) if full_best else None
            if promotable(ev, rules):
                bnd = (view.baseline or {}).get("boundary") or every[:1]
                mb = self._sweep([leader], bnd, (n, "boundary"), f"round-{n}-boundary",
                                 trials=rules.boundary_trials)
                out["device_s"] += mb.device_s
                ev = ev.model_copy(update={"boundary": list(mb.sweeps.values()),
                                           "boundary_workloads": list(bnd)})
        return out | self._verdict(decide_round(ev, rules), view, lead, ev)

    def _verdict(self, decision: Any, view: View, lead: str | None,
                 ev: RoundEvidence | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "verdict": decision.verdict, "why": decision.why, "leader": lead,
            "wins": decision.wins,
            "gates": [{"name": g.name, "passed": g.passed, "message": g.message}
                      for g in decision.gates],
            "evidence": [s.verdict_sha256 for s in
                         ([*ev.candidate, *ev.best, *ev.boundary] if ev else [])]}
        if decision.verdict == "promote" and ev is not None and view.regimes is not None:
            every = view.regimes.all_workloads()
            new = mean_ms([s for s in ev.candidate if view.regimes.is_full(list(s.latency_ms))],
                          every)
            body |= {"best_key": lead, "best_mean_ms": new,
                     "best_regime_ms": {r.name: mean_ms(ev.candidate, r.workloads)
                                        for r in view.regimes.regimes},
                     "gain": (1 - new / view.best_mean_ms) if new and view.best_mean_ms else None,
                     "signatures": None}
        return body

    # --- helpers ----------------------------------------------------------------------------
    def _sweep(self, sols: Sequence[Solution], uuids: Sequence[str], salt: tuple[Any, ...],
               tag: str, *, trials: int | None = None, profile: bool = False) -> Measured:
        """One sweep; ``profile`` only where its signatures are read (the baseline, the
        leader's full repeats): screening and the boundary replay run without it."""
        self.say(f"  sweep {tag}: {len(sols)} solution(s) x {len(uuids)} workload(s)")
        return run_sweep(self.setup, sols, uuids, seed=derive_seed(self.seed, *salt), tag=tag,
                         trials=trials, profile=profile)

    @staticmethod
    def _heaviest_signature(view: View) -> dict[str, Any] | None:
        if view.regimes is None:
            return None
        for r in sorted(view.regimes.regimes, key=lambda r: -r.share):
            sig = view.signatures.get(r.name)
            if sig:
                return sig
        return None


def _signatures(view: View) -> dict[str, Any]:
    from ..profile.signature import Signature

    return {name: None if sig is None else Signature.model_validate(sig)
            for name, sig in view.signatures.items()}
