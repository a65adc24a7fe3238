"""``sandboxharness run --local DATASET``: FlashInfer-Bench's verb, every stage on.

Exit 0 when every selected candidate has a verdict (rejections are results), 2 bad input,
3 a harness failure (the other candidates still ran and were recorded).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import InputError

if TYPE_CHECKING:
    from ..dataset import RunEvent
    from ..models import Verdict


def _names(values: list[str] | None) -> list[str]:
    """Repeated options and comma-separated lists both work (``--solutions a,b --solutions c``)."""
    return [n for v in values or [] for n in v.split(",") if n]


def _gpus(value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        if "," in value or not value.isdigit():
            return [int(v) for v in value.split(",") if v != ""]
        return list(range(int(value)))
    except ValueError:
        raise InputError("--gpus takes a count (2) or indices (0,3)", where=value) from None


def run(  # noqa: PLR0913  (typer: one parameter per CLI flag)
    *,  # options only
    local: Annotated[Path, typer.Option("--local", help="FlashInfer-Bench dataset folder")],
    definitions: Annotated[list[str] | None, typer.Option(
        help="only these definitions (repeat or comma-separate)")] = None,
    solutions: Annotated[list[str] | None, typer.Option(
        help="only these solutions (repeat or comma-separate)")] = None,
    resume: Annotated[bool, typer.Option(help="skip pairs already traced under this policy "
                                         "and harness version")] = False,
    jobs: Annotated[int, typer.Option(min=1, max=256, help="candidates at once")] = 1,
    gpus: Annotated[str | None, typer.Option(help="GPU count or indices (default: all "
                                             "visible)")] = None,
    policy: Annotated[Path | None, typer.Option(help="policy YAML (default: policies/"
                                                "default.yaml)")] = None,
    backend: Annotated[str | None, typer.Option(help="auto | process | docker")] = None,
    seed: Annotated[int | None, typer.Option(min=0, max=2**53 - 1,
                                             help="run seed (default: random, printed)")] = None,
    audit_log: Annotated[Path | None, typer.Option(help="append every verdict here")] = None,
    signing_key: Annotated[Path | None, typer.Option(help="Ed25519 key for the audit log")] = None,
    log_file: Annotated[Path | None, typer.Option(help="JSON-lines event log")] = None,
    log_level: Annotated[str, typer.Option(help="debug | info | warning | error")] = "info",
    json_out: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    ray: Annotated[str | None, typer.Option("--ray", help="run each candidate as a Ray task on "
                                            "this cluster: auto or HOST:PORT")] = None,
    archive: Annotated[Path | None, typer.Option(help="archive every artifact here (default: "
                                                 "DATASET/archive)")] = None,
    no_archive: Annotated[bool, typer.Option("--no-archive", help="archive nothing")] = False,
) -> None:
    """Evaluate every solution of a dataset on its definition's workloads; traces go to
    DATASET/traces/. Exit 0 all have verdicts, 2 bad input, 3 harness error."""
    from ..api import default_policy
    from ..dataset import RunOptions, run_dataset
    from ..intake import load_policy
    from . import audit_hook, signals
    from .output import fail
    from .render import console
    from .run_progress import LEVELS, Progress, RunLog

    log: RunLog | None = None
    try:
        if log_level not in LEVELS:
            raise InputError(f"--log-level must be one of {', '.join(LEVELS)}", where=log_level)
        if no_archive and archive is not None:
            raise InputError("--archive and --no-archive exclude each other", where=str(archive))
        if log_file is not None and not log_file.parent.is_dir():
            raise InputError("directory does not exist", where=str(log_file.parent))
        signer = audit_hook.load_signer_first(audit_log, signing_key, None, policy)
        pol = load_policy(policy) if policy else default_policy()
        options = RunOptions(policy=pol, backend=backend, jobs=jobs, gpus=_gpus(gpus),
                             resume=resume, seed=seed, definitions=_names(definitions),
                             solutions=_names(solutions),
                             hidden_paths=audit_hook.secret_paths(audit_log, signing_key),
                             archive=None if no_archive else archive or local / "archive")
        log = RunLog(log_file, log_level) if log_file is not None else None
        err = console(stderr=True)
        progress = Progress(err, total=0, live=err.is_terminal and not json_out)

        def on_event(event: RunEvent) -> None:
            progress(event)
            if log is not None:
                log(event)

        def record(verdict: Verdict) -> None:
            with signals.deferred():  # a signal during the append waits for its end
                audit_hook.record(verdict, audit_log, None, signer)

        executor = None
        if ray is not None:
            from ..dataset.ray_exec import RayExecutor

            executor = RayExecutor(ray, local, options)
        with progress:
            summary = run_dataset(local, options, on_event=on_event, record=record,
                                  executor=executor,
                                  on_plan=lambda n: setattr(progress, "total", n))
    except Exception as exc:  # noqa: BLE001  every failure becomes one line + exit code
        fail(exc)
    finally:
        if log is not None:
            log.close()
    counts = summary.counts()
    if json_out:
        print(json.dumps({"seed": summary.seed, "wall_s": round(summary.wall_s, 3),
                          "counts": counts, "exit_code": summary.exit_code,
                          "candidates": [{
                              "definition": o.task.definition, "solution": o.task.solution,
                              "decision": o.verdict.decision if o.verdict else None,
                              "reasons": sorted({r.code.value for r in o.verdict.reasons})
                              if o.verdict else [],
                              "error": str(o.error) if o.error else None,
                              "traces": o.traces, "wall_s": round(o.wall_s, 3)}
                              for o in summary.outcomes]}, indent=2))
    else:
        print(f"run: {counts['promote']} promoted, {counts['reject']} rejected, "
              f"{counts['error']} error(s), {counts['skipped']} resumed in {summary.wall_s:.1f} s "
              f"(seed {summary.seed}); traces in {Path(local) / 'traces'}", file=sys.stderr)
    raise typer.Exit(summary.exit_code)
