"""The two things the CLI asks for: a dataset's tables on disk, and its report."""

from __future__ import annotations

from pathlib import Path

from .export import Format, write_tables
from .html import render
from .load import load_input
from .tables import all_tables


def export_dataset(root: str | Path, out: str | Path, fmt: Format = "parquet", *,
                   campaign: str | Path | None = None) -> dict[str, Path]:
    """``out/{results,verdicts,rounds}.<fmt>`` and ``out/manifest.json``."""
    tables = all_tables(load_input(root, campaign))
    return write_tables(tables, Path(out), fmt)


def build_report(root: str | Path, out: str | Path, *,
                 campaign: str | Path | None = None) -> dict[str, Path]:
    """``out/report.html`` and the Parquet tables beside it."""
    inp = load_input(root, campaign)
    tables = all_tables(inp)
    written = write_tables(tables, Path(out), "parquet")
    page = Path(out) / "report.html"
    text = render(tables, dataset=inp.root.resolve().name)
    tmp = page.with_name(f".{page.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o644)
    tmp.replace(page)
    written["report"] = page
    return written
