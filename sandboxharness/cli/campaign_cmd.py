"""``sandboxharness campaign run|status``: the optimisation loop over one definition.

Exit codes: ``run`` 0 when the campaign stopped (round budget, GPU or wall-time budget,
plateau), 4 when the supervisor escalated (needs a human: stall, cycle, regression, no
direction left), 2 bad input (a broken state is one line), 3 a harness failure; ``status`` 0.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InputError

if TYPE_CHECKING:
    from ..generators.interface import Generator
    from ..loop.view import View

campaign_app = typer.Typer(add_completion=False, no_args_is_help=True,
                           help="Bounded optimisation campaigns with enforced promotion rules.")
GENERATORS = ("triton-params", "command", "mcp")


def _generator(name: str, command: str | None, timeout_s: float, state: Path) -> Generator:
    if name == "triton-params":
        from ..generators.triton_params import TritonParamsGenerator

        return TritonParamsGenerator()
    if name == "command":
        if not command:
            raise InputError("--generator command needs --command 'AGENT ARGS...' (the "
                             "placeholders {bundle} {bundle_md} {out} {k} are filled in)")
        from ..generators.command import CommandGenerator

        return CommandGenerator(shlex.split(command), state / "agent", timeout_s=timeout_s)
    if name == "mcp":
        try:
            from ..generators import mcp as mcp_gen  # type: ignore[attr-defined, unused-ignore]
        except ImportError:
            raise InputError("the mcp generator is not available in this build",
                             where="--generator") from None
        made: Generator = mcp_gen.make_generator(state)
        return made
    raise InputError(f"unknown generator (known: {', '.join(GENERATORS)})", where=name)


@campaign_app.command("run")
def run(  # noqa: PLR0913  (typer: one parameter per CLI flag)
    *,
    local: Annotated[Path, typer.Option("--local", help="FlashInfer-Bench dataset folder")],
    definition: Annotated[str, typer.Option(help="the definition to optimise")],
    start: Annotated[Path, typer.Option(help="the starting Solution JSON (must be correct)")],
    generator: Annotated[str, typer.Option(help="triton-params | command | mcp")],
    rounds: Annotated[int, typer.Option(min=0, max=10_000, help="round budget (in all)")],
    state: Annotated[Path, typer.Option(help="campaign folder: state.json, bundles, work")],
    policy: Annotated[Path | None, typer.Option(help="evaluation policy YAML")] = None,
    rules: Annotated[Path | None, typer.Option(help="campaign rules YAML (promotion numbers, "
                                               "supervisor, regimes)")] = None,
    directions: Annotated[Path | None, typer.Option(help="extra direction catalogue YAML")] = None,
    command: Annotated[str | None, typer.Option(help="agent command line (--generator "
                                                "command)")] = None,
    command_timeout: Annotated[float, typer.Option(min=1, help="seconds per agent call")] = 1800,
    backend: Annotated[str | None, typer.Option(help="auto | process | docker")] = None,
    jobs: Annotated[int, typer.Option(min=1, max=64, help="candidates at once")] = 1,
    seed: Annotated[int | None, typer.Option(min=0, max=2**53 - 1)] = None,
    acknowledge: Annotated[bool, typer.Option(help="go on after a needs-a-human stop")] = False,
    audit_log: Annotated[Path | None, typer.Option(help="append every verdict and round")] = None,
    signing_key: Annotated[Path | None, typer.Option(help="Ed25519 key for the audit log")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the status as JSON")] = False,
) -> None:
    """Run (or resume) a campaign: each round one hypothesis, k candidates, one verdict."""
    from ..api import default_policy
    from ..intake import load_policy
    from ..loop.campaign import CampaignConfig, run_campaign
    from ..loop.directions import load_yaml_model
    from ..policy.campaign import CampaignRules
    from . import audit_hook, signals
    from .output import eprint, fail

    try:
        signer = audit_hook.load_signer_first(audit_log, signing_key, None, policy)
        pol = load_policy(policy) if policy else default_policy()
        rul = load_yaml_model(rules, CampaignRules, "campaign rules") if rules else \
            CampaignRules()
        state.mkdir(parents=True, exist_ok=True)
        gen = _generator(generator, command, command_timeout, state)

        def record(verdict: Any) -> None:
            with signals.deferred():  # a signal during the append waits for its end
                audit_hook.record(verdict, audit_log, None, signer)

        def record_event(event: dict[str, Any]) -> None:
            from .. import audit

            if audit_log is None or signer is None:
                return
            with signals.deferred():
                audit.record_event(event["kind"], event["subject"], event, audit_log, signer)

        skills = None
        try:
            from ..skills import load_skills

            skills = load_skills()
        except Exception:  # noqa: BLE001  skills are guidance: a campaign runs without them
            skills = None
        cfg = CampaignConfig(dataset=local, definition=definition, start=start, generator=gen,
                             rounds=rounds, state_dir=state, policy=pol, rules=rul,
                             directions=directions, backend=backend, jobs=jobs, seed=seed,
                             acknowledge=acknowledge, skills=skills,
                             # the state (history, bundles, solutions) and the user's
                             # dataset are the harness's: no candidate reads them
                             hidden=[*audit_hook.secret_paths(audit_log, signing_key), state,
                                     Path(local)],
                             record=record if signer is not None else None,
                             record_event=record_event,
                             archive=state / "archive")
        result = run_campaign(cfg, say=eprint)
    except Exception as exc:  # noqa: BLE001  every failure becomes one line + exit code
        fail(exc)
    _show(result.view, json_out)
    raise typer.Exit(result.exit_code)


@campaign_app.command("status")
def status(
    state: Annotated[Path, typer.Option(help="campaign folder")],
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The campaign's state (verified): best, noise floor, regimes, rounds, why it ended."""
    from ..loop.state import CampaignState
    from ..loop.view import fold
    from .output import fail

    try:
        st = CampaignState.open(state)
        if not st.entries:
            raise InputError("no campaign here (no state.json)", where=str(state))
        view = fold(st)
    except Exception as exc:  # noqa: BLE001
        fail(exc)
    _show(view, json_out)


def summary(view: View) -> dict[str, Any]:
    m = view.regimes
    return {
        "definition": view.config["definition"], "generator": view.config["generator"],
        "best": view.best_key, "best_mean_ms": view.best_mean_ms,
        "start_mean_ms": (view.baseline or {}).get("best_mean_ms"),
        "noise_floor": view.noise_floor, "device_s": round(view.device_s, 3),
        "wall_s": round(view.wall_s, 3),
        "regimes": [{"name": r.name, "workloads": len(r.workloads), "share": round(r.share, 4),
                     "explicit": r.explicit} for r in (m.regimes if m else [])],
        "rounds": [{"round": r["round"], "verdict": r["verdict"],
                    "direction": (r.get("direction") or {}).get("id"),
                    "candidates": len(r.get("candidates", [])), "why": r.get("why"),
                    "best_mean_ms": r.get("best_mean_ms")} for r in view.rounds],
        "interrupted_round": (view.open_round or {}).get("round"),
        "directions": {k: v.model_dump() for k, v in view.status.items()},
        "ended": view.halted,
    }


def _show(view: View, json_out: bool) -> None:
    s = summary(view)
    if json_out:
        print(json.dumps(s, allow_nan=False, default=str))
        return
    print(f"campaign {s['definition']} ({s['generator']}): best {s['best']}")
    print(f"  full-sweep mean {s['best_mean_ms']} ms (start {s['start_mean_ms']} ms), noise "
          f"floor {s['noise_floor']:.1%}, GPU-seconds {s['device_s']}")
    for r in s["regimes"]:
        print(f"  regime {r['name']}: {r['workloads']} workload(s), {r['share']:.1%} of the "
              f"latency{' (explicit)' if r['explicit'] else ''}")
    for r in s["rounds"]:
        print(f"  round {r['round']}: {r['verdict']:<7} {r['direction']} "
              f"({r['candidates']} candidate(s)) {r['why']}")
    if s["ended"]:
        print(f"  ended: {s['ended']['kind']} ({s['ended']['reason']}: {s['ended']['detail']})")
