"""The supervisor: when a campaign stops, and when it needs a human.

Pure functions of the folded history. Before a round: the budget (rounds, GPU-seconds, wall
time) stops the campaign. After a round: a regression (the best measured slower than its
recorded mean beyond ``regression_factor`` noise floors, or failing outright), a cycle (a round
whose proposals were all candidates already measured, or one hypothesis picked and rejected
``cycle_repeats`` rounds running) or a stall (``stall_rounds`` rounds
without a promotion above the noise floor) escalate: a structured ``needs_human`` event with its
reason and what a person could change; a plateau (the last promotions each gained under
``plateau_gain``) stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .view import View

__all__ = ["Budget", "Event", "after_round", "before_round"]

EventKind = Literal["stop", "needs_human"]
_SUGGEST = {
    "stall": "try another generator or model family, new references, or a different language",
    "cycle": "the generator repeats itself: widen its search, or give it the rejected history",
    "regression": "check the machine (clocks, other processes) and re-measure the best",
    "no_direction": "every applicable direction is blocked: add directions (--directions) or "
                    "review the blocked ones",
}


@dataclass(frozen=True)
class Budget:
    rounds: int
    gpu_seconds: float | None = None
    wall_s: float | None = None


@dataclass(frozen=True)
class Event:
    kind: EventKind
    reason: str
    detail: str
    round: int

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "reason": self.reason, "detail": self.detail,
                               "round": self.round}
        if self.kind == "needs_human" and self.reason in _SUGGEST:
            out["suggestion"] = _SUGGEST[self.reason]
        return out


def before_round(view: View, budget: Budget) -> Event | None:
    done = len(view.rounds)
    if done >= budget.rounds:
        return Event("stop", "budget_rounds", f"{done} of {budget.rounds} rounds done", done)
    if budget.gpu_seconds is not None and view.device_s >= budget.gpu_seconds:
        return Event("stop", "budget_gpu", f"{view.device_s:.0f} GPU-seconds used of "
                     f"{budget.gpu_seconds:.0f}", done)
    if budget.wall_s is not None and view.wall_s >= budget.wall_s:
        return Event("stop", "budget_wall", f"{view.wall_s:.0f} s of {budget.wall_s:.0f} s "
                     "used", done)
    return None


def no_direction(view: View) -> Event:
    return Event("needs_human", "no_direction", "no applicable direction is left unblocked: "
                 + ", ".join(sorted(d for d, s in view.status.items() if s.blocked)),
                 len(view.rounds))


def after_round(view: View) -> Event | None:
    if not view.rounds:
        return None
    rules = view.rules.supervisor
    last = view.rounds[-1]
    n = last["round"]
    paired = last.get("paired_best_mean_ms")
    if last.get("best_failed"):
        return Event("needs_human", "regression", f"the current best failed its paired "
                     f"measurement in round {n}", n)
    if paired and view.best_mean_ms and last["verdict"] != "promote":
        limit = view.best_mean_ms * (1 + rules.regression_factor * view.noise_floor)
        if paired > limit:
            return Event("needs_human", "regression", f"the best measured {paired:.4g} ms in "
                         f"round {n}, recorded {view.best_mean_ms:.4g} ms (beyond "
                         f"{rules.regression_factor:g} noise floors)", n)
    if not last.get("candidates") and last.get("repeated", 0) > 0:
        return Event("needs_human", "cycle", f"round {n}: every proposal ({last['repeated']}) "
                     "was a candidate already measured", n)
    tail = view.rounds[-rules.cycle_repeats:]
    ids = {(r.get("direction") or {}).get("id") for r in tail}
    if (len(view.rounds) >= rules.cycle_repeats >= 2 and len(ids) == 1
            and all(r["verdict"] == "reject" for r in tail)):
        return Event("needs_human", "cycle", f"hypothesis {ids.pop()!r} picked and rejected "
                     f"{rules.cycle_repeats} rounds running", n)
    since = 0
    for r in reversed(view.rounds):
        if r["verdict"] == "promote":
            break
        since += 1
    if since >= rules.stall_rounds:
        return Event("needs_human", "stall", f"{since} rounds without a gain above the noise "
                     f"floor ({view.noise_floor:.1%})", n)
    gains = [r.get("gain") or 0.0 for r in view.rounds if r["verdict"] == "promote"]
    recent = gains[-rules.plateau_rounds:]
    if len(recent) >= rules.plateau_rounds and all(g < rules.plateau_gain for g in recent):
        return Event("stop", "plateau", f"the last {len(recent)} promotions each gained under "
                     f"{rules.plateau_gain:.1%}", n)
    return None
