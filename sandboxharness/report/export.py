"""Write the tables as Parquet or CSV (pyarrow), with a manifest naming the schema version."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._internal import host
from ..errors import InputError
from .schema import SCHEMA_VERSION, TABLES, arrow_schema
from .tables import Row

if TYPE_CHECKING:
    import pyarrow as pa

Format = Literal["parquet", "csv"]


def to_arrow(table: str, rows: list[Row]) -> pa.Table:
    """Rows as an Arrow table of the schema's columns and types (absent values: null)."""
    import pyarrow as pa

    schema = arrow_schema(table)
    columns = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.Table.from_pydict(columns, schema=schema)


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""A CSV cell starting with one of these is a formula to a spreadsheet: text from documents
(a solution named ``=HYPERLINK(...)``) is written with a leading ``'`` in CSV (not Parquet)."""


def defuse(rows: list[Row], table: str) -> list[Row]:
    text = [c.name for c in TABLES[table] if c.kind == "string"]
    out = []
    for row in rows:
        fixed = dict(row)
        for name in text:
            v = fixed.get(name)
            if isinstance(v, str) and v.startswith(FORMULA_START):
                fixed[name] = "'" + v
        out.append(fixed)
    return out


def _replace(path: Path, write: Any) -> None:
    """Whole file or nothing: written beside, then renamed over."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the tables from a BI service
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_tables(tables: dict[str, list[Row]], out: Path, fmt: Format) -> dict[str, Path]:
    """``out/<table>.<fmt>`` for every table, and ``out/manifest.json``; returns the paths."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if fmt not in ("parquet", "csv"):
        raise InputError(f"unknown format {fmt!r} (parquet or csv)", where="--format")
    if out.exists() and not out.is_dir():
        raise InputError("not a directory", where=str(out))
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name in TABLES:
        rows = tables.get(name, [])
        table = to_arrow(name, defuse(rows, name) if fmt == "csv" else rows)
        path = out / f"{name}.{fmt}"
        if fmt == "parquet":
            _replace(path, lambda tmp, t=table: pq.write_table(t, tmp, compression="zstd"))
        else:
            _replace(path, lambda tmp, t=table: pacsv.write_csv(t, tmp))
        written[name] = path
    manifest = {"export_schema": SCHEMA_VERSION, "format": fmt,
                "harness_version": host.harness_version(),
                "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "tables": {n: {"file": p.name, "rows": len(tables.get(n, []))}
                           for n, p in written.items()}}
    mpath = out / "manifest.json"
    _replace(mpath, lambda tmp: Path(tmp).write_text(json.dumps(manifest, indent=2) + "\n"))
    written["manifest"] = mpath
    return written
