"""The gateway's tools as a plain library object (the MCP server is a thin shell over it).

:meth:`Gateway.call` is the one entry: capability, rate limit, the tool, then one audit event
for the call whatever happened (a refusal or an error is a result too). A tool's refusal is a
:class:`Refused`; an audit append that fails fails the call (the log is never skipped).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..dataset.layout import Dataset, load_dataset
from ..errors import HarnessError, InputError
from ..intake import check_pairing, parse_model
from ..loop.bundle import build_task_bundle, render_markdown
from ..models import Policy, Solution, Verdict
from ..models._base import FrozenModel, Name, canonical_json, sha256_tag
from ..skills import SkillSet, load_skills
from .budgets import Budgets, RateLimiter
from .store import GatewayStore, new_id
from .summary import mean_latency_ms, profile_of, verdict_summary
from .tokens import TOOLS, AgentGrant

if TYPE_CHECKING:
    from ..audit import Signer
    from ..sandbox.interface import Sandbox

__all__ = ["Gateway", "GatewayConfig", "Refused"]


class _CampaignName(FrozenModel):
    name: Name


class Refused(HarnessError):
    """The agent may not do this (capability, budget, rate, ownership): its answer, not a fault."""

    exit_code = 2


@dataclass(frozen=True)
class GatewayConfig:
    dataset: Path
    state: Path
    policy: Policy
    transport: str = "stdio"
    audit_log: Path | None = None
    signer: Signer | None = None
    campaigns: Path | None = None
    skills: Path | None = None
    backend: str | None = None
    hidden_paths: tuple[Path, ...] = field(default_factory=tuple)
    """Files no candidate may see: token file, audit log, keys, this gateway's state."""


def _hash(obj: Any) -> str:
    return sha256_tag(canonical_json(obj))


def _args_hash(args: dict[str, Any]) -> str:
    try:
        return _hash(args)
    except (ValueError, TypeError, RecursionError):  # huge integers, NaN: not I-JSON
        raise Refused("arguments are not I-JSON (RFC 8785 cannot encode them)") from None


class Gateway:
    def __init__(self, cfg: GatewayConfig) -> None:
        self.cfg = cfg
        self.dataset: Dataset = load_dataset(cfg.dataset)
        self.skills: SkillSet = load_skills(cfg.skills)
        self.store = GatewayStore(cfg.state)
        self.budgets = Budgets(cfg.state / "budgets.json")
        self.rate = RateLimiter()
        self._eval_lock = threading.Lock()
        self._sandbox: Sandbox | None = None

    # --- the one entry --------------------------------------------------------------------
    def call(self, grant: AgentGrant, tool: str, args: dict[str, Any]) -> Any:
        t0 = time.monotonic()
        extra: dict[str, Any] = {}
        outcome, reason, result, args_hash = "ok", None, None, None
        try:
            args_hash = _args_hash(args)
            if not self.rate.allow(grant):  # first: refused calls are recorded, so count too
                raise Refused(f"rate limit: at most {grant.requests_per_minute} calls a minute")
            if tool not in TOOLS:
                raise Refused(f"unknown tool {tool!r}")
            if not grant.may_use_tool(tool):
                raise Refused(f"agent {grant.id!r} may not call {tool}")
            result = getattr(self, "_" + tool)(grant, extra, **args)
            return result
        except Refused as e:
            outcome, reason = "refused", str(e)
            raise
        except HarnessError as e:
            outcome, reason = "error", str(e)
            raise
        finally:
            event = {"kind": "gateway.call", "subject": grant.id, "agent": grant.id,
                     "tool": tool, "arguments_sha256": args_hash,
                     "result_sha256": _hash(result) if result is not None else None,
                     "outcome": outcome, "reason": reason, "transport": self.cfg.transport,
                     "duration_s": round(time.monotonic() - t0, 6), **extra}
            self._audit(grant, event)

    def _audit(self, grant: AgentGrant, event: dict[str, Any]) -> None:
        if self.cfg.audit_log is None or self.cfg.signer is None:
            return
        from ..audit import record_event

        record_event("gateway.call", grant.id, event, self.cfg.audit_log, self.cfg.signer)

    # --- tools ----------------------------------------------------------------------------
    def _definition(self, grant: AgentGrant, name: str) -> Any:
        entry = self.dataset.definitions.get(name)
        if entry is None or not grant.may_see(name):  # the same answer: nothing leaks
            raise Refused(f"no definition {name[:100]!r} for agent {grant.id!r}")
        return entry

    def _list_definitions(self, grant: AgentGrant, extra: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for name, e in sorted(self.dataset.definitions.items()):
            if grant.may_see(name):
                d = e.definition
                out.append({"name": name, "op_type": d.op_type, "workloads": len(e.workloads),
                            "description": (d.description or "")[:300],
                            "sha256": d.content_hash()})
        return out

    def _get_task(self, grant: AgentGrant, extra: dict[str, Any], definition: str,
                  direction: str | None = None) -> dict[str, Any]:
        d = self._definition(grant, definition).definition
        rounds = self.store.open_rounds(definition)
        if rounds:  # a campaign is waiting: hand out its bundle as it was written
            task = json.loads((rounds[0] / "task.json").read_text(encoding="utf-8"))
            bundle, markdown = task["bundle"], task["markdown"]
            sha = _hash(bundle)
        else:
            best = self.store.best(definition)
            b = build_task_bundle(d, self.cfg.policy,
                                  best=best["solution"] if best else None,
                                  skills=self.skills.relevant(d.op_type, d.name, direction))
            bundle, markdown, sha = b.model_dump(mode="json"), render_markdown(b), b.sha256
        self.store.save_bundle(sha, bundle)
        extra["bundle_sha256"] = sha
        return {"definition": definition, "sha256": sha, "markdown": markdown,
                "campaign_round": rounds[0].name if rounds else None}

    def _submit_candidate(self, grant: AgentGrant, extra: dict[str, Any],
                          solution: dict[str, Any]) -> dict[str, Any]:
        sol = parse_model(Solution, solution, "submit_candidate.solution")
        entry = self._definition(grant, sol.definition)
        check_pairing(entry.definition, sol, list(entry.workloads),
                      where="submit_candidate.solution")
        why = self.budgets.refusal(grant)
        if why:
            raise Refused(why)
        vid = new_id()
        extra.update(id=vid, candidate_sha256=sol.content_hash())
        with self._eval_lock:  # one evaluation at a time: its lanes are the machine's
            t0 = time.monotonic()
            try:
                verdict = self._evaluate(entry, sol)
            finally:
                self.budgets.charge(grant, time.monotonic() - t0)
        extra["decision"] = verdict.decision
        sol_doc = sol.to_json_dict()
        self.store.save_submission(vid, {"agent": grant.id, "solution": sol_doc,
                                         "verdict": verdict.model_dump(mode="json")})
        if self.cfg.audit_log is not None and self.cfg.signer is not None:
            from ..audit import record_verdict

            record_verdict(verdict, self.cfg.audit_log, self.cfg.signer)
        mean = mean_latency_ms(verdict)
        if verdict.decision == "promote" and mean is not None:
            self.store.offer_best(sol.definition, sol_doc, mean, vid)
        for rnd in self.store.open_rounds(sol.definition):
            self.store.deliver(rnd, vid, sol_doc)
        return {**verdict_summary(vid, verdict), "budget": self.budgets.usage(grant)}

    def _evaluate(self, entry: Any, sol: Solution) -> Verdict:
        from ..pipeline import Harness
        from ..sandbox import select_backend

        policy = self.cfg.policy
        if self._sandbox is None:
            hidden = [p for p in self.cfg.hidden_paths if p.exists()]
            self._sandbox = select_backend(self.cfg.backend or policy.sandbox.backend, policy,
                                           hidden_paths=hidden)
        return Harness(policy, sandbox=self._sandbox).evaluate(
            entry.definition, sol, list(entry.workloads), blob_root=self.dataset.root)

    def _owned(self, grant: AgentGrant, vid: str) -> dict[str, Any]:
        try:
            rec = self.store.load_submission(vid)
        except InputError as e:
            raise Refused(str(e)) from None
        if rec is None or rec.get("agent") != grant.id:  # another agent's: the same answer
            raise Refused(f"no submission {vid!r} by agent {grant.id!r}")
        return rec

    def _get_verdict(self, grant: AgentGrant, extra: dict[str, Any], id: str  # noqa: A002
                     ) -> dict[str, Any]:
        rec = self._owned(grant, id)
        return verdict_summary(id, Verdict.model_validate(rec["verdict"]))

    def _get_profile(self, grant: AgentGrant, extra: dict[str, Any], id: str  # noqa: A002
                     ) -> dict[str, Any]:
        rec = self._owned(grant, id)
        return {"id": id, **profile_of(Verdict.model_validate(rec["verdict"]))}

    def _campaign_status(self, grant: AgentGrant, extra: dict[str, Any],
                         campaign: str) -> dict[str, Any]:
        root = self.cfg.campaigns
        try:
            name = parse_model(_CampaignName, {"name": campaign}, "campaign").name
        except InputError as e:
            raise Refused(str(e)) from None
        if root is None or not (root / name / "state.json").is_file():
            raise Refused(f"no campaign {campaign[:100]!r}")
        from ..loop.state import CampaignState

        state = CampaignState.open(root / name)  # the hash chain is verified on the way in
        setup = state.last("campaign")  # entries' bodies
        definition = (setup or {}).get("definition")
        if not isinstance(definition, str) or not grant.may_see(definition):
            raise Refused(f"no campaign {campaign[:100]!r}")  # the same answer: nothing leaks
        return _campaign_summary(name, state)


def _campaign_summary(name: str, state: Any) -> dict[str, Any]:
    """The set-up, the baseline, the round count and the last rounds' verdicts and events."""
    setup = state.last("campaign") or {}
    rounds = state.of_kind("round")
    return {"campaign": name, "definition": setup.get("definition"),
            "generator": setup.get("generator"), "policy": setup.get("policy"),
            "head": state.head, "baseline": state.last("baseline"),
            "rounds": len(rounds), "last_rounds": rounds[-5:],
            "last_events": state.of_kind("event")[-5:]}
