"""``sandboxharness examples``: evaluate every example solution in ``kernels/`` (the main job)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import HarnessError, InputError
from .render import console as make_console
from .render import literal

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
_KEYS = ("definition", "solution", "workloads", "expect")


def load_manifest(kernels: Path) -> list[dict[str, Any]]:
    """``<kernels>/examples.json``'s examples; InputError (one line) for anything amiss."""
    path = kernels / "examples.json"
    if not path.is_file():
        what = "no examples.json manifest in this folder" if kernels.is_dir() else "no such folder"
        raise InputError(f"{what}; pass --kernels DIR (the repository's kernels/ folder, "
                         "which a wheel does not ship)", where=str(kernels))
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"not readable JSON: {literal(str(exc))}", where=str(path)) from None
    items = doc.get("examples") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not all(
            isinstance(i, dict) and all(isinstance(i.get(k), str) for k in _KEYS) for i in items):
        raise InputError("expected {\"examples\": [{" + ", ".join(f"\"{k}\": str" for k in _KEYS)
                         + ", ...}, ...]}", where=str(path))
    return items


def examples(
    kernels: Annotated[Path, typer.Option(help="kernels folder")] = KERNELS,
    policy: Annotated[Path | None, typer.Option(help="policy YAML")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Evaluate the example solutions and print their verdicts. Exit 1 if any differs
    from the expectation in kernels/examples.json."""
    from ..api import evaluate_files

    try:
        manifest = load_manifest(kernels)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise typer.Exit(exc.exit_code) from None
    console = make_console()
    table = Table(title="example solutions")
    for col in ("solution", "expected", "decision", "reasons", "time (s)", "ok"):
        table.add_column(col, overflow="fold")
    mismatches, rows = 0, []
    for item in manifest:
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
        table.add_row(escape(literal(row["solution"].removeprefix("solutions/")
                                     .removesuffix(".json"))),
                      escape(literal(item["expect"])), decision,
                      escape(literal(", ".join(codes))),
                      f"{row['seconds']:.1f}", "yes" if ok else "[red]NO[/]")
    if json_out:
        print(json.dumps(rows))
    else:
        console.print(table)
    raise typer.Exit(1 if mismatches else 0)
