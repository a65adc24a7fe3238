"""The supervisor: budget stops, stall/cycle/regression escalate, plateau stops."""

from __future__ import annotations

from typing import Any

from sandboxharness.loop.supervisor import Budget, after_round, before_round
from sandboxharness.loop.view import View
from sandboxharness.policy.campaign import CampaignRules, SupervisorRules

RULES = CampaignRules(noise_floor_min=0.02, supervisor=SupervisorRules(
    stall_rounds=3, plateau_rounds=2, plateau_gain=0.05, cycle_repeats=2,
    regression_factor=3.0))


def rnd(n: int, verdict: str, direction: str = "d", **kw: Any) -> dict[str, Any]:
    return {"round": n, "verdict": verdict, "direction": {"id": f"{direction}{n}"
                                                          if direction == "d" else direction},
            "candidates": [{"key": f"k{n}"}], "repeated": 0} | kw


def view(*rounds: dict[str, Any], **kw: Any) -> View:
    v = View(config={}, rules=RULES, best_mean_ms=10.0, **kw)
    v.rounds = list(rounds)
    return v


def test_budgets_stop_before_a_round() -> None:
    assert before_round(view(), Budget(rounds=1)) is None
    ev = before_round(view(rnd(1, "reject")), Budget(rounds=1))
    assert ev is not None and (ev.kind, ev.reason) == ("stop", "budget_rounds")
    ev = before_round(view(device_s=100.0), Budget(rounds=9, gpu_seconds=50))
    assert ev is not None and ev.reason == "budget_gpu"
    ev = before_round(view(wall_s=61.0), Budget(rounds=9, wall_s=60))
    assert ev is not None and ev.reason == "budget_wall"


def test_stall_escalates_with_a_suggestion() -> None:
    v = view(rnd(1, "promote", gain=0.2), rnd(2, "reject"), rnd(3, "archive"), rnd(4, "reject"))
    ev = after_round(v)
    assert ev is not None and (ev.kind, ev.reason) == ("needs_human", "stall")
    assert "another generator" in ev.body()["suggestion"]
    assert after_round(view(rnd(1, "reject"), rnd(2, "reject"))) is None


def test_a_round_of_only_repeated_candidates_is_a_cycle() -> None:
    ev = after_round(view(rnd(1, "reject", candidates=[], repeated=4)))
    assert ev is not None and ev.reason == "cycle" and "already measured" in ev.detail


def test_one_hypothesis_rejected_rounds_running_is_a_cycle() -> None:
    ev = after_round(view(rnd(1, "reject", direction="same"), rnd(2, "reject", direction="same")))
    assert ev is not None and ev.reason == "cycle" and "'same'" in ev.detail
    # archived (a partial gain) is not a cycle
    assert after_round(view(rnd(1, "archive", direction="s"), rnd(2, "reject",
                                                                   direction="s"))) is None


def test_the_best_measured_slower_beyond_the_noise_is_a_regression() -> None:
    ev = after_round(view(rnd(1, "reject", paired_best_mean_ms=10.0 * (1 + 3 * 0.02) + 0.1)))
    assert ev is not None and ev.reason == "regression"
    assert after_round(view(rnd(1, "reject", paired_best_mean_ms=10.5))) is None
    ev = after_round(view(rnd(1, "reject", best_failed=True)))
    assert ev is not None and ev.reason == "regression" and "failed" in ev.detail


def test_small_promotions_in_a_row_are_a_plateau() -> None:
    ev = after_round(view(rnd(1, "promote", gain=0.01), rnd(2, "promote", gain=0.02)))
    assert ev is not None and (ev.kind, ev.reason) == ("stop", "plateau")
    assert after_round(view(rnd(1, "promote", gain=0.01), rnd(2, "promote", gain=0.2))) is None
