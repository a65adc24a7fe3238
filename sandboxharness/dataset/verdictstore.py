"""The dataset's verdict store: every full verdict of a run, beside its traces.

A trace line keeps what FlashInfer-Bench reads (status, latency, speedup); the verdict keeps
the rest (per-stage durations, reasons, details). The coordinator appends each verdict as one
JSON line to ``verdicts/<op_type>/<definition>.jsonl`` with the trace files' discipline: one
``write`` of a whole line, then ``fsync``; a line cut by a crash is dropped before the next
append. A re-run appends again: readers see every verdict in file order (the last is newest).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..models import Definition, Verdict
from .tracefile import LineAppender, parse_line, whole_lines

MAX_VERDICT_LINE = 64 * 1024 * 1024
"""A stored verdict line larger than this is refused when read (a run writes a few KiB to a
few MiB per verdict; the cap keeps a planted file from exhausting memory)."""


def verdict_path(root: Path, definition: Definition) -> Path:
    return root / "verdicts" / definition.op_type / f"{definition.name}.jsonl"


class VerdictWriter(LineAppender):
    """One writer for a run's verdict files (the coordinator alone writes)."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def append(self, definition: Definition, verdict: Verdict) -> Path:
        path = verdict_path(self.root, definition)
        self.append_bytes(path, (verdict.model_dump_json() + "\n").encode("utf-8"))
        return path


@dataclass(frozen=True)
class StoredVerdict:
    verdict: Verdict
    path: Path
    line: int
    """1-based line number in ``path``."""


def _files(root: Path) -> list[Path]:
    folder = root / "verdicts"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*.jsonl") if p.is_file() and not p.is_symlink())


def iter_stored(root: str | Path) -> Iterator[StoredVerdict]:
    """Every stored verdict of the dataset at ``root``, files sorted, lines in order. A torn
    last line (a crash mid-append) is skipped; any other bad line is an InputError naming the
    file and line."""
    for path in _files(Path(root)):
        for n, raw in whole_lines(path, MAX_VERDICT_LINE):
            yield StoredVerdict(parse_line(Verdict, raw, f"{path}:{n}", "verdict"), path, n)


def iter_verdicts(root: str | Path) -> Iterator[Verdict]:
    """Every verdict stored for the dataset at ``root`` (see :func:`iter_stored`)."""
    for stored in iter_stored(root):
        yield stored.verdict


__all__ = ["MAX_VERDICT_LINE", "StoredVerdict", "VerdictWriter", "iter_stored",
           "iter_verdicts", "verdict_path"]
