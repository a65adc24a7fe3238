"""A whole campaign: start or resume from ``DIR/state.json``, then rounds until the supervisor
stops or escalates.

The audit log gets every verdict the rounds measure (each candidate, each repeat, each replay)
and, after each round, one ``campaign.round`` event record: the round's verdict (archive,
promote or reject) and why, the gates, the direction, the task bundle's hash, the hashes of the
measured verdicts it rests on and the state's head hash; the supervisor's stop or escalation is
a ``campaign.event`` record. The subject of both is the campaign's id (its first state hash).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..dataset.layout import load_dataset
from ..errors import InputError
from ..generators.interface import Generator
from ..intake import check_pairing, load_solution
from ..models import Policy, Verdict
from ..policy.campaign import CampaignRules
from .controller import Controller
from .directions import load_catalogue
from .measure import SweepSetup
from .state import CampaignState, candidate_key
from .supervisor import Budget, Event, after_round, before_round, no_direction
from .view import View, fold

__all__ = ["CampaignConfig", "CampaignResult", "campaign_id", "round_event", "run_campaign"]


@dataclass
class CampaignConfig:
    dataset: Path
    definition: str
    start: Path
    generator: Generator
    rounds: int
    state_dir: Path
    policy: Policy
    rules: CampaignRules = field(default_factory=CampaignRules)
    directions: Path | None = None
    backend: str | None = None
    jobs: int = 1
    seed: int | None = None
    acknowledge: bool = False
    """Resume past a ``needs_human`` event (a person has looked)."""
    hidden: list[Path] = field(default_factory=list)
    record: Callable[[Verdict], None] | None = None
    record_event: Callable[[dict[str, Any]], None] | None = None
    """Audit events (each carries its ``kind`` and ``subject``)."""
    skills: Any = None
    archive: Path | None = None


@dataclass
class CampaignResult:
    view: View
    ended: dict[str, Any] | None

    @property
    def exit_code(self) -> int:
        """0: stopped by budget or plateau; 4: needs a human."""
        return 4 if self.ended and self.ended["kind"] == "needs_human" else 0


def _check_same(view: View, cfg: CampaignConfig, start_key: str, where: str) -> None:
    was = view.config
    for name, now in (("definition", cfg.definition), ("start", start_key),
                      ("generator", cfg.generator.name)):
        if was.get(name if name != "start" else "start_key") != now:
            raise InputError(f"the state belongs to another campaign ({name} was "
                             f"{was.get(name if name != 'start' else 'start_key')!r}, now "
                             f"{now!r})", where=where)


def run_campaign(cfg: CampaignConfig, say: Callable[[str], None] = lambda _l: None
                 ) -> CampaignResult:
    state = CampaignState.open(cfg.state_dir)
    ds = load_dataset(cfg.dataset)
    entry = ds.definitions.get(cfg.definition)
    if entry is None or not entry.workloads:
        raise InputError(f"definition {cfg.definition!r} is not in the dataset or has no "
                         "workloads", where=str(cfg.dataset))
    start = load_solution(cfg.start)
    check_pairing(entry.definition, start, list(entry.workloads), where=str(cfg.start))
    key = candidate_key(start)
    if not state.entries:
        state.store_solution(start)
        state.append("campaign", {
            "definition": cfg.definition, "dataset": str(cfg.dataset.resolve()),
            "start_key": key, "start_name": start.name, "language": start.spec.language.value,
            "generator": cfg.generator.name,
            "policy": cfg.policy.name, "policy_sha256": cfg.policy.content_hash(),
            "rules": cfg.rules.model_dump(mode="json"),
            "seed": secrets.randbits(53) if cfg.seed is None else cfg.seed,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds")})
    view = fold(state)
    _check_same(view, cfg, key, str(state.path))
    if view.halted and view.halted["kind"] == "needs_human" and not cfg.acknowledge:
        say(f"campaign halted: needs a human ({view.halted['reason']}: "
            f"{view.halted['detail']}); pass --acknowledge to go on")
        return CampaignResult(view, view.halted)
    if view.open_round or view.halted:
        state.append("resumed", {"interrupted_round": (view.open_round or {}).get("round"),
                                 "acknowledged": bool(view.halted)})
        if view.open_round:
            say(f"resuming: round {view.open_round['round']} was interrupted and runs again")
    setup = SweepSetup(work=cfg.state_dir / "work", definition=entry.definition,
                       workloads=entry.workloads, source_root=ds.root, policy=cfg.policy,
                       backend=cfg.backend, jobs=cfg.jobs, hidden=cfg.hidden, record=cfg.record,
                       archive=cfg.archive)
    ctl = Controller(state, setup, cfg.policy, load_catalogue(cfg.directions), cfg.generator,
                     seed=int(view.config["seed"]), skills=cfg.skills, say=say)
    if view.baseline is None:
        ctl.baseline(view)
    budget = Budget(cfg.rounds, cfg.rules.supervisor.max_gpu_seconds,
                    cfg.rules.supervisor.max_wall_s)
    ended: Event | None = None
    while True:
        view = fold(state)
        ended = before_round(view, budget)
        direction = ctl.choose(view) if ended is None else None
        if ended is None and direction is None:
            ended = no_direction(view)
        if ended is not None or direction is None:
            break
        body = ctl.round(view.next_round, direction)
        say(f"round {body['round']}: {body['verdict']} — {direction.id}: {body['why']}")
        if cfg.record_event is not None:
            cfg.record_event(round_event(body, fold(state), state))
        ended = after_round(fold(state))
        if ended is not None:
            break
    assert ended is not None  # noqa: S101  the loop leaves only with an event
    state.append("event", ended.body())
    if cfg.record_event is not None:
        cfg.record_event(ended.body() | {"kind": "campaign.event", "event": ended.kind,
                                         "subject": campaign_id(state),
                                         "state_head": state.head})
    say(f"campaign {'needs a human' if ended.kind == 'needs_human' else 'stopped'}: "
        f"{ended.reason} ({ended.detail})")
    return CampaignResult(fold(state), ended.body())


def round_event(body: dict[str, Any], view: View, state: CampaignState) -> dict[str, Any]:
    """The round as an audit event (``campaign.round``; see the module's docstring)."""
    event = {k: body.get(k) for k in ("round", "verdict", "why", "direction", "hypothesis",
                                      "bundle_sha256", "leader", "wins", "gates", "evidence",
                                      "best_mean_ms", "gain", "device_s", "notes")}
    return event | {"kind": "campaign.round", "subject": campaign_id(state),
                    "definition": view.config["definition"], "state_head": state.head,
                    "candidates": [c["key"] for c in body.get("candidates", [])]}


def campaign_id(state: CampaignState) -> str:
    """A campaign is named by the hash of its first state entry (its set-up)."""
    return str(state.entries[0]["hash"])
