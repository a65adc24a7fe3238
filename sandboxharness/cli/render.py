"""Human rendering of verdicts and findings (rich); JSON rendering stays in main.

On a terminal: a table at the terminal's width. Anywhere else (a pipe, a file, a CI log): one
plain line per stage, never cut and never wrapped, so a log keeps every reason whole.
Text that came from the candidate (messages, names) is shown literally: no rich markup, no
control characters, so it can neither style the output nor print a line of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:  # annotations only: keeps ``sandboxharness --help`` from loading pydantic
    from ..models import StageResult, Verdict

_STYLE = {"passed": "green", "failed": "bold red", "skipped": "yellow"}
WIDE = 1 << 20
"""Columns for output that is not a terminal: rich then folds and truncates nothing."""


def console(*, stderr: bool = False) -> Console:
    """Rich at the terminal's width; elsewhere as wide as the text, without wrapping."""
    probe = Console(stderr=stderr)
    if probe.is_terminal:
        return probe
    return Console(stderr=stderr, width=WIDE, soft_wrap=True)


def literal(text: str) -> str:
    """One line, shown as it is: control characters escaped (``\\n`` stays two characters)."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)


def stage_line(console: Console, result: StageResult) -> None:
    style = _STYLE[result.status]
    console.print(f"  [{style}]{result.status:>7}[/] {result.stage.value:<12} "
                  f"{result.duration_s:7.2f} s")


def _detail(s: StageResult) -> str:
    detail = "; ".join(f"{r.code.value}: {r.message}" for r in s.reasons) or str(
        s.details.get("reason", ""))
    if s.stage.value == "benchmark" and s.status == "passed":
        geo = s.details.get("speedup_geomean")
        detail = f"speedup vs reference {geo:.3g}x (geomean; {s.details['clock']})" if geo else ""
    return literal(detail)


def _decision(v: Verdict) -> str:
    codes = sorted({r.code.value for r in v.reasons})
    return f"decision: {v.decision.upper()}" + (f"  ({', '.join(codes)})" if codes else "")


def verdict(console: Console, v: Verdict) -> None:
    title = literal(f"{v.candidate.name}  ->  {v.definition.name}")
    if not console.is_terminal:
        console.out(title, highlight=False)
        for s in v.stages:
            console.out(f"  {s.status:>7} {s.stage.value:<12} {s.duration_s:8.2f} s  "
                        f"{_detail(s)}".rstrip(), highlight=False)
        console.out(_decision(v), highlight=False)
        return
    table = Table(title=escape(title), title_justify="left")
    for col in ("stage", "status", "time (s)"):
        table.add_column(col)
    table.add_column("detail", overflow="fold")
    for s in v.stages:
        table.add_row(s.stage.value, f"[{_STYLE[s.status]}]{s.status}[/]",
                      f"{s.duration_s:.2f}", escape(_detail(s)))
    console.print(table)
    colour = "green" if v.decision == "promote" else "red"
    console.print(_decision(v).replace(v.decision.upper(),
                                       f"[bold {colour}]{v.decision.upper()}[/]", 1))
