"""``sandboxharness examples``: evaluate every example solution in ``kernels/`` (the main job)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..errors import HarnessError

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def examples(
    kernels: Annotated[Path, typer.Option(help="kernels folder")] = KERNELS,
    policy: Annotated[Path | None, typer.Option(help="policy YAML")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Evaluate the example solutions and print their verdicts. Exit 1 if any differs
    from the expectation in kernels/examples.json."""
    from ..api import evaluate_files

    manifest = json.loads((kernels / "examples.json").read_text())
    console = Console()
    table = Table(title="example solutions")
    for col in ("solution", "expected", "decision", "reasons", "time (s)", "ok"):
        table.add_column(col, overflow="fold")
    mismatches, rows = 0, []
    for item in manifest["examples"]:
        t0 = time.monotonic()
        try:
            v = evaluate_files(kernels / item["definition"], kernels / item["solution"],
                               kernels / item["workloads"], policy)
            decision: str = v.decision
            codes = sorted({r.code.value for r in v.reasons})
        except HarnessError as exc:
            decision, codes = "error", [str(exc)]
        ok = decision == item["expect"] and (
            not item.get("codes") or set(item["codes"]) <= set(codes))
        mismatches += not ok
        row = {"solution": item["solution"], "expected": item["expect"], "decision": decision,
               "reasons": codes, "seconds": round(time.monotonic() - t0, 2), "ok": ok}
        rows.append(row)
        table.add_row(row["solution"].removeprefix("solutions/").removesuffix(".json"),
                      item["expect"], decision, ", ".join(codes)[:80],
                      f"{row['seconds']:.1f}", "yes" if ok else "[red]NO[/]")
    if json_out:
        print(json.dumps(rows))
    else:
        console.print(table)
    raise typer.Exit(1 if mismatches else 0)
