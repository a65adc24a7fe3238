"""What a campaign's history amounts to: folded from the state's entries, no I/O.

The current best (key, full-sweep mean, per-regime means), the noise floor, the regime matrix,
the trajectory (every candidate measured), and the directions' standing (tried, rejected,
blocked, recommended) are all recomputed from the append-only history, so nothing but the
history needs to survive a kill.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from ..policy.campaign import CampaignRules
from .directions import DirectionStatus
from .regimes import RegimeMatrix
from .state import CampaignState

__all__ = ["View", "fold"]

NOISE_WINDOW = 5


@dataclass
class View:
    config: dict[str, Any]
    rules: CampaignRules
    baseline: dict[str, Any] | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    open_round: dict[str, Any] | None = None
    """A round that started and has no verdict (the process was killed during it)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    best_key: str = ""
    best_mean_ms: float | None = None
    best_regime_ms: dict[str, float] = field(default_factory=dict)
    noise_samples: list[float] = field(default_factory=list)
    regimes: RegimeMatrix | None = None
    signatures: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    status: dict[str, DirectionStatus] = field(default_factory=dict)
    recent: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    device_s: float = 0.0
    wall_s: float = 0.0

    @property
    def noise_floor(self) -> float:
        recent = self.noise_samples[-NOISE_WINDOW:]
        measured = statistics.median(recent) if recent else 0.0
        return max(self.rules.noise_floor_min, measured)

    @property
    def next_round(self) -> int:
        return (self.rounds[-1]["round"] + 1) if self.rounds else 1

    halted: dict[str, Any] | None = None
    """The supervisor's last stop or escalation, unless a later resumption acknowledged it."""


def _status(view: View, body: dict[str, Any]) -> None:
    did = (body.get("direction") or {}).get("id")
    if not did:
        return
    st = view.status.get(did, DirectionStatus())
    verdict = body["verdict"]
    rejects = st.rejects + (verdict == "reject")
    view.status[did] = DirectionStatus(
        tried=st.tried + 1, rejects=rejects,
        blocked=st.blocked or (verdict == "reject"
                               and rejects >= view.rules.supervisor.block_after_rejects
                               and not st.recommended),
        recommended=st.recommended or verdict in ("archive", "promote"))
    view.recent.append(did)


def fold(state: CampaignState) -> View:
    """The view of ``state``'s history (which must start with a ``campaign`` entry)."""
    first = state.last("campaign")
    if first is None:
        raise ValueError("state has no campaign entry")
    view = View(config=first, rules=CampaignRules.model_validate(first["rules"]),
                best_key=first["start_key"])
    for e in state.entries:
        body, kind = e["body"], e["kind"]
        if kind == "baseline":
            view.baseline = body
            view.regimes = RegimeMatrix.model_validate(body["regimes"])
            view.best_key = body["best_key"]
            view.best_mean_ms = body["best_mean_ms"]
            view.best_regime_ms = dict(body["best_regime_ms"])
            view.noise_samples += list(body.get("noise_samples", []))
            view.signatures = dict(body.get("signatures") or {})
        elif kind == "round_started":
            view.open_round = body
        elif kind == "round":
            view.open_round = None
            view.rounds.append(body)
            view.seen.update(c["key"] for c in body.get("candidates", []))
            view.noise_samples += list(body.get("noise_samples", []))
            if body["verdict"] == "promote":
                view.best_key = body["best_key"]
                view.best_mean_ms = body["best_mean_ms"]
                view.best_regime_ms = dict(body["best_regime_ms"])
                view.signatures = dict(body.get("leader_signatures") or {})
            _status(view, body)
        elif kind == "event":
            view.events.append(body)
            view.halted = body
        elif kind == "resumed" and body.get("acknowledged"):
            view.halted = None
        if kind in ("baseline", "round"):
            view.device_s += float(body.get("device_s", 0.0))
            view.wall_s += float(body.get("wall_s", 0.0))
    return view

