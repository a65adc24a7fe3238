"""``sandboxharness`` CLI. Exit codes: 0 promote/ok, 1 reject/tampered, 2 bad input, 3 harness,
130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP (after cleaning up, see ``cli.signals``).

Every error is one line on stderr (``error: ...``): no traceback, no control characters or
ANSI escapes (``errors.one_line``), at most ``errors.MAX_LINE`` characters."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from ..errors import InputError, Interrupted, one_line
from . import signals
from .output import dumps, eprint, fail, write_atomic
from .render import console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Validate, isolate, time and audit LLM-written GPU kernels.")
# not on a terminal: no width limit and no wrapping (a CI log keeps every reason whole)
err = console(stderr=True)
out = console()


@app.command()
def evaluate(  # noqa: PLR0913  (typer: one parameter per CLI flag)
    *,  # options only: typer passes them by name
    definition: Annotated[Path, typer.Option(help="FlashInfer-Bench definition JSON")],
    solution: Annotated[Path, typer.Option(help="FlashInfer-Bench solution JSON")],
    workloads: Annotated[Path | None, typer.Option(help="workloads .jsonl (default: beside "
                                                   "the definition, FIB layout)")] = None,
    policy: Annotated[Path | None, typer.Option(help="policy YAML (default: policies/"
                                                "default.yaml)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the verdict as JSON")] = False,
    seed: Annotated[int | None, typer.Option(min=0, max=2**53 - 1,
                                             help="root seed (default: random, recorded)")] = None,
    backend: Annotated[str | None, typer.Option(help="auto | process | docker")] = None,
    blob_root: Annotated[Path | None, typer.Option(help="root of safetensors blob paths")] = None,
    trace_out: Annotated[Path | None, typer.Option(help="write FIB Trace lines here")] = None,
    audit_log: Annotated[Path | None, typer.Option(help="append the verdict to this log")] = None,
    signing_key: Annotated[Path | None, typer.Option(help="Ed25519 key for the audit log")] = None,
    attestation: Annotated[Path | None, typer.Option(help="write a DSSE in-toto attestation")] = None,
    archive: Annotated[Path | None, typer.Option(help="archive every artifact here (content-"
                                                 "addressed; see `archive verify`)")] = None,
) -> None:
    """Evaluate one solution. Exit 0 promote, 1 reject, 2 bad input, 3 harness error."""
    from ..api import evaluate_files
    from . import audit_hook, render

    try:
        signer = audit_hook.load_signer_first(audit_log, signing_key, attestation, policy)
        observer = (lambda r: render.stage_line(err, r)) if err.is_terminal and not json_out \
            else None
        verdict = evaluate_files(definition, solution, workloads, policy, backend=backend,
                                 seed=seed, blob_root=blob_root, observer=observer,
                                 hidden_paths=audit_hook.secret_paths(audit_log, signing_key),
                                 archive=archive)
        if trace_out is not None:
            from ..intake import load_workloads
            from ..traces import to_traces

            wl_path = workloads
            if wl_path is None:
                from ..api import find_workloads
                from ..intake import load_definition

                wl_path = find_workloads(definition, load_definition(definition))
            lines = [t.model_dump_json(exclude_none=False) for t in
                     to_traces(verdict, load_workloads(wl_path))]
            write_atomic(trace_out, "".join(line + "\n" for line in lines))
        with signals.deferred():  # a signal during the append waits for its end
            audit_hook.record(verdict, audit_log, attestation, signer)
    except Exception as exc:  # noqa: BLE001  every failure becomes one line + exit code
        fail(exc)
    if json_out:
        print(dumps(verdict.model_dump(mode="json")))
    else:
        render.verdict(out, verdict)
    raise typer.Exit(0 if verdict.decision == "promote" else 1)


@app.command()
def validate(paths: Annotated[list[Path], typer.Argument(help="definitions, workloads "
                                                         "(.jsonl), solutions, policies")]) -> None:
    """Validate documents: one line per path. Exit 0 if all are valid, 2 if any is bad, 3 if
    the harness itself failed on one (the other paths are still answered)."""
    from ..intake import validate_file

    bad = broken = 0
    for p in paths:
        try:
            kind = validate_file(p)
            print(one_line(f"ok: {p} ({kind})"), flush=True)
        except InputError as exc:
            eprint(f"error: {exc}")
            bad += 1
        except Exception as exc:  # noqa: BLE001  one line for this path, then the next
            eprint(f"error: {p}: internal error: {type(exc).__name__}: {exc}")
            broken += 1
    raise typer.Exit(3 if broken else 2 if bad else 0)


@app.command()
def scan(
    solution: Annotated[Path, typer.Option(help="solution JSON")],
    definition: Annotated[Path | None, typer.Option(help="definition (for baseline rules)")] = None,
    policy: Annotated[Path | None, typer.Option(help="policy YAML")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
    sarif: Annotated[Path | None, typer.Option(help="also write SARIF 2.1.0 here")] = None,
) -> None:
    """Static analysis only. Exit 0 no blocking finding, 1 blocking findings, 2 bad input."""
    from dataclasses import asdict

    from ..api import default_policy
    from ..intake import load_definition, load_policy, load_solution
    from ..static import run_static

    try:
        sol = load_solution(solution)
        d = load_definition(definition) if definition else None
        pol = load_policy(policy) if policy else default_policy()
        with tempfile.TemporaryDirectory(prefix="shx-scan-") as tmp:
            report = run_static(sol, d, pol, Path(tmp))
        if sarif is not None:
            from ..static.sarif import to_sarif

            write_atomic(sarif, json.dumps(to_sarif(report.findings), indent=2))
    except Exception as exc:  # noqa: BLE001
        fail(exc)
    blocking = {id(f) for f in report.blocking}
    if json_out:
        print(dumps({"findings": [asdict(f) | {"blocking": id(f) in blocking}
                                  for f in report.findings], "tools": report.tools}))
    else:
        for f in report.findings:
            mark = "BLOCK" if id(f) in blocking else "note "
            print(f"{mark} {f.severity:<6} {f.location():<24} {f.tool}:{f.rule_id}  {f.message}")
        out.print(f"{len(report.findings)} finding(s), {len(report.blocking)} blocking")
    raise typer.Exit(1 if report.blocking else 0)


def _register_optional() -> None:
    """Sub-commands that live in their own modules."""
    try:
        from .audit_cmd import audit_app, keys_app

        app.add_typer(audit_app, name="audit", help="Verify and inspect the signed audit log.")
        app.add_typer(keys_app, name="keys", help="Generate signing keys.")
    except ImportError:
        pass
    try:
        from .doctor_cmd import doctor

        app.command(name="doctor")(doctor)
    except ImportError:
        pass
    from .archive_cmd import archive_app

    app.add_typer(archive_app, name="archive", help="Verify, show and export archived artifacts.")
    from .examples_cmd import examples
    from .run_cmd import run as run_local

    app.command(name="examples")(examples)
    app.command(name="run")(run_local)
    from .report_cmd import export, report_app

    app.command(name="export")(export)
    app.add_typer(report_app, name="report")
    from .mcp_cmd import mcp_app

    app.add_typer(mcp_app, name="mcp", help="The MCP gateway for agents (serve, token add).")
    from .campaign_cmd import campaign_app

    app.add_typer(campaign_app, name="campaign",
                  help="Optimisation campaigns: rounds, one verdict each, enforced promotion.")


_register_optional()


def run() -> None:
    """The console entry point: usage errors and interrupts are one line too."""
    code = 0
    with signals.installed():
        try:
            rv = app(standalone_mode=False)
            code = rv if isinstance(rv, int) else 0
        except typer.Abort:
            eprint("error: aborted")
            code = 130
        except typer.TyperException as exc:  # usage errors: one line, not a box
            fmt = getattr(exc, "format_message", None)
            message = fmt() if callable(fmt) else str(exc)
            eprint(f"error: {message} (see --help)")
            code = int(getattr(exc, "exit_code", 2))
        except Interrupted as exc:
            signals.reap()
            eprint(f"error: interrupted by {exc}: sandboxed processes killed, job "
                   "directories removed")
            code = exc.exit_code
    sys.exit(code)
