"""Nsight Compute's CSV, read on the trusted side as untrusted text.

The report comes out of the sandbox: the candidate shares the process ncu profiles and can
write to the file ncu writes, so everything here is capped (bytes, lines, columns, field
length, kernels) and every value checked; a report that breaks a rule is a
:class:`NcuParseError` (one line: what and where), never a crash and never partial trust.

Two layouts are read, told apart by the header: ``--page raw`` (one row per kernel launch,
one column per metric, a units row under the header; what the profile stage asks for) and
the default details page (one row per metric: ``Metric Name``, ``Metric Unit``,
``Metric Value``). Lines ncu writes about itself (``==PROF==``, ``==WARNING==``) and anything
before the header are skipped; ``==ERROR==`` lines are kept as the tool's errors.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field

MAX_REPORT_BYTES = 4 * 1024 * 1024
MAX_LINES = 50_000
MAX_LINE_CHARS = 64 * 1024
MAX_COLUMNS = 512
MAX_KERNELS = 4096
MAX_NAME_CHARS = 512
MAX_ERRORS = 20

_FIXED = ("ID", "Kernel Name")
_LONG = ("Metric Name", "Metric Unit", "Metric Value")
_SCALE = {
    # time -> nanoseconds
    "nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
    "second": 1e9, "s": 1e9,
    # bytes (ncu's prefixes are decimal)
    "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
}


class NcuParseError(ValueError):
    """The profiler's output is not a report this parser accepts (the message says why)."""


@dataclass(frozen=True)
class KernelRow:
    """One profiled kernel launch: its metrics in base units (ns, bytes, %, counts)."""

    id: int
    name: str
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class NcuReport:
    rows: list[KernelRow]
    """In the order ncu profiled them."""
    errors: list[str]
    """``==ERROR==`` lines ncu wrote (capped)."""
    layout: str
    """``raw`` or ``details``."""


def clean_name(raw: str) -> str:
    """A kernel name fit for a record: printable, capped (demangled templates run long)."""
    text = "".join(c if c.isprintable() else "?" for c in raw.strip())
    return text[:MAX_NAME_CHARS] or "?"


def number(raw: str, unit: str = "") -> float | None:
    """A finite value in base units; ``n/a``, blanks and non-numbers are None.

    ncu groups thousands with commas in CSV (``1,234.5``); a grouping that is not exactly
    that (``1.234.567``, a locale with decimal commas) is refused rather than guessed.
    """
    text = raw.strip().replace('"', "")
    if not text or text.lower() in ("n/a", "nan", "-"):
        return None
    if "," in text:
        whole, _, frac = text.partition(".")
        groups = whole.lstrip("-").split(",")
        if "," in frac or not (groups[0] and len(groups[0]) <= 3
                               and all(len(g) == 3 for g in groups[1:])):
            raise NcuParseError(f"value {raw[:40]!r} has an unknown digit grouping")
        text = whole.replace(",", "") + ("." + frac if frac else "")
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return value * _SCALE.get(unit.strip().lower(), 1.0)


def _lines(text: str, max_bytes: int) -> tuple[list[str], list[str]]:
    if len(text) > max_bytes or len(text.encode("utf-8", errors="replace")) > max_bytes:
        raise NcuParseError(f"report of more than {max_bytes} bytes")
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise NcuParseError(f"report of {len(lines)} lines (at most {MAX_LINES})")
    errors: list[str] = []
    body: list[str] = []
    for n, line in enumerate(lines, 1):
        if len(line) > MAX_LINE_CHARS:
            raise NcuParseError(f"line {n} is {len(line)} characters long "
                                f"(at most {MAX_LINE_CHARS})")
        if line.startswith("=="):
            if line.startswith("==ERROR==") and len(errors) < MAX_ERRORS:
                errors.append(clean_name(line)[:300])
            continue
        body.append(line)
    return body, errors


def _header_at(rows: list[list[str]]) -> int:
    for i, row in enumerate(rows):
        if all(col in row for col in _FIXED):
            return i
    raise NcuParseError("no CSV header with 'ID' and 'Kernel Name' columns")


def _kernel_id(raw: str, n: int) -> int:
    try:
        value = int(raw.strip().replace(",", ""))
    except ValueError:
        raise NcuParseError(f"row {n}: ID {raw[:20]!r} is not an integer") from None
    if not 0 <= value < 2**31:
        raise NcuParseError(f"row {n}: ID {value} out of range")
    return value


def parse(text: str, *, max_bytes: int = MAX_REPORT_BYTES) -> NcuReport:
    """The kernels of one ncu CSV report (see the module doc for what is accepted)."""
    body, errors = _lines(text, max_bytes)
    rows = list(csv.reader(body))
    if not rows and errors:
        return NcuReport([], errors, "raw")
    start = _header_at(rows)
    header = rows[start]
    if len(header) > MAX_COLUMNS:
        raise NcuParseError(f"header of {len(header)} columns (at most {MAX_COLUMNS})")
    if len(set(header)) != len(header):
        raise NcuParseError("header names a column twice")
    data = [r for r in rows[start + 1:] if r]
    if any(all(c in r for c in _FIXED) for r in data):
        raise NcuParseError("a second CSV header inside the report")
    if all(c in header for c in _LONG):
        kernels, layout = _long(header, data), "details"
    else:
        kernels, layout = _wide(header, data), "raw"
    return NcuReport(kernels, errors, layout)


def _wide(header: list[str], data: list[list[str]]) -> list[KernelRow]:
    col = {name: i for i, name in enumerate(header)}
    units = [""] * len(header)
    if data and (len(data[0]) <= col["ID"] or not data[0][col["ID"]].strip()):
        units = data.pop(0)  # the units row sits under the header
        if len(units) != len(header):
            raise NcuParseError(f"units row has {len(units)} fields, the header {len(header)}")
    metric_cols = [(i, n) for i, n in enumerate(header) if "__" in n]
    out: list[KernelRow] = []
    seen: set[int] = set()
    for n, row in enumerate(data, 1):
        if len(row) != len(header):
            raise NcuParseError(f"row {n} has {len(row)} fields, the header {len(header)}")
        kid = _kernel_id(row[col["ID"]], n)
        if kid in seen:
            raise NcuParseError(f"row {n}: kernel ID {kid} appears twice")
        seen.add(kid)
        metrics: dict[str, float] = {}
        for i, name in metric_cols:
            value = number(row[i], units[i] if i < len(units) else "")
            if value is not None:
                metrics[name] = value
        out.append(KernelRow(kid, clean_name(row[col["Kernel Name"]]), metrics))
        if len(out) > MAX_KERNELS:
            raise NcuParseError(f"more than {MAX_KERNELS} kernels")
    return out


def _long(header: list[str], data: list[list[str]]) -> list[KernelRow]:
    col = {name: i for i, name in enumerate(header)}
    by_id: dict[int, KernelRow] = {}
    for n, row in enumerate(data, 1):
        if len(row) != len(header):
            raise NcuParseError(f"row {n} has {len(row)} fields, the header {len(header)}")
        kid = _kernel_id(row[col["ID"]], n)
        name = clean_name(row[col["Kernel Name"]])
        kernel = by_id.get(kid)
        if kernel is None:
            if len(by_id) >= MAX_KERNELS:
                raise NcuParseError(f"more than {MAX_KERNELS} kernels")
            kernel = by_id[kid] = KernelRow(kid, name)
        elif kernel.name != name:
            raise NcuParseError(f"row {n}: kernel ID {kid} names two kernels")
        metric = row[col["Metric Name"]].strip()
        value = number(row[col["Metric Value"]], row[col["Metric Unit"]])
        if metric and value is not None:
            kernel.metrics[metric] = value
    return sorted(by_id.values(), key=lambda k: k.id)
