"""``sandboxharness export`` and ``sandboxharness report [summary|best]``: a dataset's
tables (Parquet/CSV), its HTML report, and FlashInfer-Bench's two text views.

Thin: the work is in ``sandboxharness.report``. Exit 0 on success, 2 bad input (one line
naming the file and line), 3 anything else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import HarnessError, InputError
from .output import fail

Local = Annotated[Path, typer.Option("--local", help="The dataset (FlashInfer-Bench layout).")]
Campaign = Annotated[Path | None, typer.Option(
    "--campaign", help="A campaign directory (state.json / history.jsonl): adds its rounds.")]

report_app = typer.Typer(invoke_without_command=True, add_completion=False,
                         help="An HTML report of a dataset, or FlashInfer-Bench's text views.")


def export(local: Local, out: Annotated[Path, typer.Option("--out", help="Output directory.")],
           fmt: Annotated[str, typer.Option("--format", help="parquet or csv.")] = "parquet",
           campaign: Campaign = None) -> None:
    """Write results, verdicts and rounds tables (one row per solution x workload in
    results) and manifest.json to --out."""
    from ..report.build import export_dataset

    if fmt not in ("parquet", "csv"):
        fail(InputError(f"unknown format {fmt!r} (parquet or csv)", where="--format"))
    try:
        written = export_dataset(local, out, "csv" if fmt == "csv" else "parquet",
                                 campaign=campaign)
    except (HarnessError, OSError) as exc:
        fail(exc if isinstance(exc, HarnessError) else InputError(str(exc), where=str(out)))
    for path in written.values():
        typer.echo(str(path))


@report_app.callback()
def report(ctx: typer.Context,
           local: Annotated[Path | None, typer.Option(
               "--local", help="The dataset (FlashInfer-Bench layout).")] = None,
           out: Annotated[Path | None, typer.Option(
               "--out", help="Directory for report.html and its Parquet tables.")] = None,
           campaign: Campaign = None) -> None:
    """Write DIR/report.html (self-contained, offline) and the Parquet tables beside it."""
    if ctx.invoked_subcommand is not None:
        return
    if local is None or out is None:
        fail(InputError("report needs --local DATASET and --out DIR (or a sub-command: "
                        "summary, best)", where="report"))
    from ..report.build import build_report

    try:
        written = build_report(local, out, campaign=campaign)
    except (HarnessError, OSError) as exc:
        fail(exc if isinstance(exc, HarnessError) else InputError(str(exc), where=str(out)))
    typer.echo(str(written["report"]))


def _views(local: list[Path], which: str) -> None:
    from ..report import fibviews
    from ..report.load import load_input

    try:
        inputs = [load_input(p) for p in local]
    except HarnessError as exc:
        fail(exc)
    for inp in inputs:
        lines = fibviews.summary_lines(inp.traces) if which == "summary" else \
            fibviews.best_lines(inp.traces, list(inp.dataset.definitions))
        for line in lines:
            typer.echo(line.text)


LocalMany = Annotated[list[Path], typer.Option(
    "--local", help="A dataset; repeat for several (each gets its own view).")]


@report_app.command("summary")
def summary(local: LocalMany) -> None:
    """FlashInfer-Bench's `report summary`: trace counts and latency range."""
    _views(local, "summary")


@report_app.command("best")
def best(local: LocalMany) -> None:
    """FlashInfer-Bench's `report best`: each definition's best passed trace."""
    _views(local, "best")
