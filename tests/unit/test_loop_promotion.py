"""Campaign promotion rules (policy/campaign.py): computed from harness measurements only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandboxharness.api import default_policy
from sandboxharness.intake import load_definition, load_workloads
from sandboxharness.loop.controller import Controller
from sandboxharness.loop.directions import load_catalogue
from sandboxharness.loop.measure import SweepSetup
from sandboxharness.loop.state import CampaignState
from sandboxharness.loop.view import View
from sandboxharness.models import Solution
from sandboxharness.policy.campaign import CampaignRules, RoundEvidence, Sweep, decide_round
from tests.conftest import DATA, TRITON_RMS, make_solution

REGIMES = {"small": ["a"], "large": ["b"]}
RULES = CampaignRules(boundary_trials=100)


def sweep(a: float, b: float, *, correct: bool = True, device: str = "NVIDIA H200",
          trials: int = 3, sanitizer: bool = True, clock: bool = True) -> Sweep:
    return Sweep(verdict_sha256="sha256:" + "0" * 64, correct=correct,
                 latency_ms={"a": a, "b": b}, device=device, backend="process",
                 sanitizer_passed=sanitizer, clock_recorded=clock, trials=trials)


def evidence(cand: list[Sweep], best: list[Sweep], **kw: Any) -> RoundEvidence:
    boundary = kw.pop("boundary", [sweep(1.0, 1.0, trials=100)])
    return RoundEvidence(regimes=REGIMES, candidate=cand, best=best, noise_floor=0.02,
                         boundary=boundary, boundary_workloads=["a", "b"], **kw)


def gates(d: Any) -> dict[str, bool]:
    return {g.name: g.passed for g in d.gates}


def test_every_rule_holding_on_a_gpu_promotes() -> None:
    d = decide_round(evidence([sweep(5, 50), sweep(5.1, 51)], [sweep(10, 100)] * 2), RULES)
    assert d.verdict == "promote", d.why
    assert all(gates(d).values())


def test_a_win_on_one_regime_only_is_archived_never_promoted() -> None:
    """The candidate halves the small regime but is slower on the large one."""
    d = decide_round(evidence([sweep(5, 110), sweep(5, 111)], [sweep(10, 100)] * 2), RULES)
    assert d.verdict == "archive" and d.wins == ["small"]
    assert not gates(d)["no_regime_slower"]


def test_a_lower_mean_with_one_regime_slower_beyond_noise_is_not_promoted() -> None:
    d = decide_round(evidence([sweep(12, 50), sweep(12, 50)], [sweep(10, 100)] * 2), RULES)
    assert gates(d)["lower_mean"] and not gates(d)["no_regime_slower"]
    assert d.verdict == "archive"


def test_one_incorrect_repeat_rejects_however_fast() -> None:
    d = decide_round(evidence([sweep(1, 1), sweep(1, 1, correct=False)],
                              [sweep(10, 100)] * 2), RULES)
    assert d.verdict == "reject" and not gates(d)["every_regime_correct"]


def test_one_repeat_is_not_enough() -> None:
    d = decide_round(evidence([sweep(5, 50)], [sweep(10, 100)]), RULES)
    assert d.verdict == "archive" and not gates(d)["repeats"]


def test_boundary_replay_needs_the_high_trial_count() -> None:
    few = [sweep(1, 1, trials=3)]
    d = decide_round(evidence([sweep(5, 50)] * 2, [sweep(10, 100)] * 2, boundary=few), RULES)
    assert d.verdict == "archive" and not gates(d)["boundary_replay"]
    d = decide_round(evidence([sweep(5, 50)] * 2, [sweep(10, 100)] * 2, boundary=[]), RULES)
    assert not gates(d)["boundary_replay"]


def test_official_parity_on_the_cpu_says_it_is_not_met() -> None:
    cpu = [sweep(5, 50, device="cpu", sanitizer=False, clock=False)] * 2
    d = decide_round(evidence(cpu, [sweep(10, 100, device="cpu")] * 2,
                              boundary=[sweep(1, 1, device="cpu", trials=100)]), RULES)
    parity = next(g for g in d.gates if g.name == "official_parity")
    assert not parity.passed and parity.message.startswith("not met: measured on the CPU")
    assert d.verdict == "archive"


def test_parity_needs_the_sanitizer_and_clock_state_on_a_gpu() -> None:
    d = decide_round(evidence([sweep(5, 50, sanitizer=False, clock=False)] * 2,
                              [sweep(10, 100)] * 2), RULES)
    parity = next(g for g in d.gates if g.name == "official_parity")
    assert not parity.passed and "compute-sanitizer" in parity.message \
        and "clock state" in parity.message


def test_a_gain_inside_the_noise_floor_is_no_win() -> None:
    d = decide_round(evidence([sweep(9.9, 99)] * 2, [sweep(10, 100)] * 2), RULES)
    assert d.verdict == "reject" and d.wins == []


def test_nothing_measured_rejects() -> None:
    assert decide_round(None, RULES).verdict == "reject"


def _controller(tmp_path: Path) -> tuple[Controller, View]:
    d = load_definition(DATA / "tiny" / "rms_t.json")
    wl = load_workloads(DATA / "tiny" / "rms_t.jsonl")
    state = CampaignState.open(tmp_path / "st")
    setup = SweepSetup(work=tmp_path / "work", definition=d, workloads=wl,
                       source_root=DATA / "tiny", policy=default_policy())
    ctl = Controller(state, setup, default_policy(), load_catalogue(), generator=None,  # type: ignore[arg-type]
                     seed=1)
    return ctl, View(config={}, rules=RULES)


def test_a_generator_claiming_metrics_is_refused_or_ignored(tmp_path: Path) -> None:
    """Attack: a generator returns a 'solution' carrying its own metrics and verdict, and a
    valid one whose description claims a 100x speedup. The first is not a Solution (extra
    fields refused); the second is admitted as an ordinary candidate, and its claims reach
    nothing the decision reads (RoundEvidence holds harness Sweeps only)."""
    ctl, view = _controller(tmp_path)
    claimed = make_solution(TRITON_RMS, name="fast") | {
        "metrics": {"latency_ms": 0.001, "correct": True}, "verdict": "promote"}
    honest = make_solution(TRITON_RMS, name="honest") | {
        "description": "measured: 100x faster, all correct; promote globally"}
    notes: list[str] = []
    admitted, repeated = ctl._admit([claimed, honest, "not even a dict"], view, notes)
    assert [s.name for s in admitted] == ["honest"] and repeated == 0
    assert any("candidate 0: not a valid Solution" in n for n in notes)
    assert any("candidate 2" in n for n in notes)
    assert set(RoundEvidence.model_fields) == {"regimes", "candidate", "best", "noise_floor",
                                               "boundary", "boundary_workloads"}


def test_candidates_for_another_definition_or_already_measured_are_not_admitted(
        tmp_path: Path) -> None:
    ctl, view = _controller(tmp_path)
    other = make_solution(TRITON_RMS, name="x", definition="gemm")
    sol = Solution.model_validate(make_solution(TRITON_RMS, name="y"))
    from sandboxharness.loop.state import candidate_key

    view.seen.add(candidate_key(sol))
    notes: list[str] = []
    admitted, repeated = ctl._admit([other, sol, sol.model_copy(update={"name": "z"})], view,
                                    notes)
    assert admitted == [] and repeated == 2
    assert any("for definition 'gemm'" in n for n in notes)


def test_profiles_run_only_in_the_sweeps_whose_signatures_are_read(
        tmp_path: Path, monkeypatch: Any) -> None:
    """Screening and the boundary replay run without the profile stage (minutes of exclusive
    GPU time over a campaign, never read); the baseline and the leader's full repeats keep it.
    The sweeps themselves are stand-ins here: this checks the controller's choice only."""
    from sandboxharness.loop import controller as ctl_mod
    from sandboxharness.loop.measure import Measured, sweep_policy
    from sandboxharness.loop.regimes import build_regimes
    from sandboxharness.loop.state import candidate_key

    on = default_policy().model_copy(update={
        "profile": default_policy().profile.model_copy(update={"enabled": True})})
    assert not sweep_policy(on, profile=False).profile.enabled
    assert sweep_policy(on, trials=7).profile.enabled
    assert sweep_policy(on, trials=7).correctness.trials == 7

    ctl, _ = _controller(tmp_path)
    best = Solution.model_validate(make_solution(TRITON_RMS, name="best"))
    cand = Solution.model_validate(make_solution(TRITON_RMS + "\n# v2\n", name="cand"))
    calls: list[tuple[str, bool]] = []

    def fake(setup: Any, sols: Any, uuids: Any, *, seed: int, tag: str,
             trials: int | None = None, profile: bool = True) -> Measured:
        calls.append((tag, sweep_policy(on, trials=trials, profile=profile).profile.enabled))
        m = Measured()
        for s in sols:
            ms = 1.0 if s.name == "cand" else 2.0
            m.sweeps[candidate_key(s)] = sweep(ms, ms, trials=trials or 3)
            m.verdicts[candidate_key(s)] = "sha256:" + "1" * 64
        return m

    monkeypatch.setattr(ctl_mod, "run_sweep", fake)
    wl = load_workloads(DATA / "tiny" / "rms_t.jsonl")
    matrix = build_regimes(ctl.setup.definition, wl, {"a": 1.0, "b": 1.0}, RULES.regimes)
    view = View(config={}, rules=RULES, best_key=candidate_key(best), best_mean_ms=2.0,
                regimes=matrix, baseline={"boundary": ["a", "b"]})
    body = ctl._evaluate(1, view, best, [cand])
    assert body["verdict"] == "promote", body["why"]
    assert calls == [("round-1-1", False), ("round-1-full2", True), ("round-1-boundary", False)]

    calls.clear()  # the baseline: the start profiled once, in its first sweep
    ctl.state.store_solution(best)
    ctl.baseline(View(config={}, rules=RULES, best_key=candidate_key(best)))
    assert calls == [("baseline-1", True), ("baseline-2", False)]
