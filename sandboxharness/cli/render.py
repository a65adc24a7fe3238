"""Human rendering of verdicts and findings (rich); JSON rendering stays in main."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..models import StageResult, Verdict

_STYLE = {"passed": "green", "failed": "bold red", "skipped": "yellow"}


def stage_line(console: Console, result: StageResult) -> None:
    style = _STYLE[result.status]
    console.print(f"  [{style}]{result.status:>7}[/] {result.stage.value:<12} "
                  f"{result.duration_s:7.2f} s")


def verdict(console: Console, v: Verdict) -> None:
    table = Table(title=f"{v.candidate.name}  ->  {v.definition.name}", title_justify="left")
    for col in ("stage", "status", "time (s)", "detail"):
        table.add_column(col)
    for s in v.stages:
        detail = "; ".join(f"{r.code.value}: {r.message}" for r in s.reasons) or str(
            s.details.get("reason", ""))
        if s.stage.value == "benchmark" and s.status == "passed":
            geo = s.details.get("speedup_geomean")
            detail = f"speedup vs reference {geo:.3g}x (geomean; {s.details['clock']})" if geo else ""
        table.add_row(s.stage.value, f"[{_STYLE[s.status]}]{s.status}[/]",
                      f"{s.duration_s:.2f}", detail[:160])
    console.print(table)
    colour = "green" if v.decision == "promote" else "red"
    console.print(f"decision: [bold {colour}]{v.decision.upper()}[/]"
                  + (f"  ({', '.join(sorted({r.code.value for r in v.reasons}))})"
                     if v.reasons else ""))
