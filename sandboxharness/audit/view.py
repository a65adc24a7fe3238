"""Read-only views of a log for ``audit show`` / ``audit export`` (no verification).

Records after the newest checkpoint are flagged ``signed=False``: they were never
committed (a crashed or foreign writer) and must not be read as audit evidence.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

from ..errors import InputError
from .interface import DEFAULT_LIMITS, AuditLimits, FormatError
from .log import read_log
from .merkle import hash_leaf
from .records import decode_record, leaf_tag


@dataclass(frozen=True)
class LogEntry:
    index: int
    record: dict[str, Any]
    leaf_hash: str
    signed: bool

    @property
    def verdict(self) -> dict[str, Any]:
        """The record's verdict; empty for an event record (FORMAT.md, "Event records")."""
        v: dict[str, Any] = self.record.get("verdict") or {}
        return v

    @property
    def decision(self) -> str:
        """The verdict's decision, or ``event <kind>`` for an event record."""
        if "verdict" in self.record:
            return str(self.record["decision"])
        return f"event {self.record.get('kind')}"

    def field(self, *path: str) -> str:
        node: Any = self.verdict
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return "" if node is None else str(node)

    def reason_codes(self) -> list[str]:
        return [str(r.get("code")) for r in self.verdict.get("reasons") or []
                if isinstance(r, dict)]


def read_entries(log_path: Path, limits: AuditLimits = DEFAULT_LIMITS
                 ) -> tuple[list[LogEntry], list[str]]:
    lines, checkpoints = read_log(log_path, limits)
    committed = max((c.checkpoint.size for c in checkpoints), default=0)
    entries, warnings = [], []
    for i, line in enumerate(lines):
        try:
            record = decode_record(line)
        except FormatError as exc:
            warnings.append(f"line {i + 1} skipped: {exc}")
            continue
        entries.append(LogEntry(i, record, leaf_tag(hash_leaf(line)), i < committed))
    if any(not e.signed for e in entries):
        warnings.append("records marked UNSIGNED come after the newest checkpoint: not evidence")
    return entries, warnings


def parse_when(text: str, *, end_of_day: bool) -> datetime:
    """ISO date or date-time; a bare date means the start (or end) of that UTC day."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime.combine(day, time.max if end_of_day else time.min, UTC)
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"not an ISO date or date-time: {text!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def select(entries: Sequence[LogEntry], *, decision: str | None = None,
           definition: str | None = None, author: str | None = None,
           since: datetime | None = None, until: datetime | None = None) -> list[LogEntry]:
    out = []
    for e in entries:
        when = datetime.fromisoformat(e.record["recorded_at"])
        if decision and e.decision != decision:
            continue
        if definition and definition not in (e.field("definition", "name"),
                                             e.field("definition", "sha256")):
            continue
        if author and e.field("candidate", "author") != author:
            continue
        if (since and when < since) or (until and when > until):
            continue
        out.append(e)
    return out


CSV_COLUMNS = ["index", "signed", "recorded_at", "decision", "reasons", "candidate",
               "candidate_sha256", "author", "language", "definition", "definition_sha256",
               "policy", "policy_sha256", "seed", "harness_version", "leaf_hash"]


def _row(e: LogEntry) -> dict[str, str]:
    r = e.record
    return {"index": str(e.index), "signed": str(e.signed).lower(),
            "recorded_at": r["recorded_at"], "decision": e.decision,
            "reasons": ";".join(e.reason_codes()), "candidate": e.field("candidate", "name"),
            "candidate_sha256": str(r.get("candidate_sha256", "")),
            "author": e.field("candidate", "author"),
            "language": e.field("candidate", "language"),
            "definition": e.field("definition", "name"),
            "definition_sha256": str(r.get("definition_sha256", "")),
            "policy": e.field("policy", "name"), "policy_sha256": str(r.get("policy_sha256", "")),
            "seed": str(r.get("seed", "")), "harness_version": str(r["harness_version"]),
            "leaf_hash": e.leaf_hash}


def _cell(value: str) -> str:
    """Neutralise spreadsheet formulas (CSV injection): names come from untrusted authors."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def export_csv(entries: Sequence[LogEntry]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for e in entries:
        writer.writerow({k: _cell(v) for k, v in _row(e).items()})
    return buf.getvalue()


def export_jsonl(entries: Sequence[LogEntry]) -> Iterator[str]:
    for e in entries:
        yield json.dumps({"index": e.index, "signed": e.signed, "leaf_hash": e.leaf_hash,
                          "record": e.record}, sort_keys=True, ensure_ascii=False)
