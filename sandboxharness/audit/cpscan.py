"""The checkpoints file, streamed: every entry parsed and its signature checked (in
workers when there are many), the valid ones kept as fixed-size rows in a spooled
temporary file, so memory stays bounded however many checkpoints there are.

Then, for the log's origin: checkpoints come in append order, so their sizes never go
down. The ones that do (a replayed or forked checkpoint) are *anomalies*: reported as
rollbacks and kept apart (capped) for the root comparison; the others are replayed in
order to the log scan, which compares each root as it reaches that size.
"""

from __future__ import annotations

import struct
import tempfile
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .checkpoint import SidecarReader, parse_signed_checkpoint
from .interface import AuditLimits, FormatError, TamperFinding, TamperKind
from .keys import PublicKey
from .note import SignatureMismatch, verified_keys

_ROW = struct.Struct("<QQQ32sH")  # entry number, byte offset, size, root, origin id
_MAX_ORIGINS = 1024
MAX_ANOMALIES = 4096
MAX_FINDINGS = 1000
_BATCH = 512

Entry = tuple[int, int, str | None]
"""(entry number, byte offset, note text or None)."""


def check_entries(entries: Sequence[Entry], keys: Sequence[PublicKey],
                  limits: AuditLimits) -> list[tuple[str, object, object, object, object]]:
    """Per entry: ("ok", size, root, origin, key ids) or (kind, message, size, -, -)."""
    out: list[tuple[str, object, object, object, object]] = []
    for _, _, text in entries:
        try:
            if text is None:
                raise FormatError("not a well-formed signed note")
            sc = parse_signed_checkpoint(text, limits)
        except FormatError as exc:
            out.append((TamperKind.MALFORMED_CHECKPOINT.value, str(exc), None, None, None))
            continue
        cp = sc.checkpoint
        try:
            ids = verified_keys(sc.note, keys)
        except SignatureMismatch as exc:
            out.append((TamperKind.BAD_SIGNATURE.value, f"{exc}: it was altered", cp.size,
                        None, None))
            continue
        if not ids:
            names = ", ".join(sorted({s.name for s in sc.note.signatures}))
            out.append((TamperKind.UNTRUSTED_CHECKPOINT.value,
                        f"has no signature by a trusted key (signed by {names}; after a key "
                        "rotation pass every old public key)", cp.size, None, None))
            continue
        out.append(("ok", cp.size, cp.root, cp.origin, tuple(ids)))
    return out


def label(j: int, offset: int, size: int | None = None) -> str:
    text = f"checkpoint #{j} (byte {offset} of the checkpoints file)"
    return text if size is None else f"{text} for size {size}"


@dataclass
class Checkpoints:
    """What the sidecar holds, once checked."""

    valid: int = 0
    findings: list[TamperFinding] = field(default_factory=list)
    more_findings: int = 0
    key_ids: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    counts: Counter[int] = field(default_factory=Counter)
    newest: dict[int, tuple[int, str]] = field(default_factory=dict)
    """origin id -> (size, text) of its largest valid checkpoint."""
    torn_bytes: int = 0
    rows: tempfile.SpooledTemporaryFile[bytes] = field(
        default_factory=lambda: tempfile.SpooledTemporaryFile(max_size=16 << 20))

    def add(self, finding: TamperFinding) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(finding)
        else:
            self.more_findings += 1

    def origin_id(self, origin: str) -> int:
        if origin in self.origins:
            return self.origins.index(origin)
        if len(self.origins) < _MAX_ORIGINS:
            self.origins.append(origin)
            return len(self.origins) - 1
        return _MAX_ORIGINS  # "some other origin"

    def rows_for(self, origin_id: int) -> Iterator[tuple[int, int, int, bytes]]:
        self.rows.seek(0)
        while chunk := self.rows.read(_ROW.size * 4096):
            for j, offset, size, root, oid in _ROW.iter_unpack(chunk):
                if oid == origin_id:
                    yield j, offset, size, root


Submit = Callable[[list[Entry]], Callable[[], list[tuple[str, object, object, object, object]]]]


def read_checkpoints(chunks: Iterable[bytes], keys: Sequence[PublicKey], limits: AuditLimits,
                     submit: Submit | None = None) -> Checkpoints:
    """Parse and check every entry, in batches; ``submit(batch)`` starts a batch (in a
    worker) and returns how to get its results. By default batches run here."""
    result, reader = Checkpoints(), SidecarReader(limits)
    batch: list[Entry] = []
    jobs: deque[tuple[list[Entry], Callable[[], Any]]] = deque()

    def start() -> None:
        entries = list(batch)
        batch.clear()
        if submit is None:
            found = check_entries(entries, keys, limits)
            jobs.append((entries, lambda: found))
        else:
            jobs.append((entries, submit(entries)))

    def drain(keep: int) -> None:
        while len(jobs) > keep:
            entries, job = jobs.popleft()
            for entry, outcome in zip(entries, job(), strict=True):
                _record(result, entry, outcome)

    j = 0
    for chunk in chunks:
        for entry in reader.feed(chunk):
            batch.append((j, entry.offset, entry.text))
            j += 1
            if len(batch) >= _BATCH:
                start()
                drain(4)
    last, _, result.torn_bytes = reader.finish()
    for entry in last:
        batch.append((j, entry.offset, entry.text))
        j += 1
    if batch:
        start()
    drain(0)
    return result


def _record(result: Checkpoints, entry: tuple[int, int, str | None],
            outcome: tuple[str, object, object, object, object]) -> None:
    """One checkpoint's check: ``entry`` (position, file offset, its text when kept) and
    ``outcome`` (status, then size, root, origin, key ids - or a message and a size)."""
    (j, offset, text), (status, a, b, c, d) = entry, outcome
    if status != "ok":
        size = b if isinstance(b, int) else None
        result.add(TamperFinding(TamperKind(status), None, f"{label(j, offset, size)}: {a}"
                           if status != TamperKind.UNTRUSTED_CHECKPOINT.value else
                           f"{label(j, offset, size)} {a}"))
        return
    if not (isinstance(a, int) and isinstance(b, bytes) and isinstance(c, str)
            and isinstance(d, tuple)):
        raise TypeError("malformed checkpoint check result")
    oid = result.origin_id(c)
    result.valid += 1
    result.counts[oid] += 1
    result.key_ids += [k for k in d if k not in result.key_ids]
    if text is not None and a >= result.newest.get(oid, (-1, ""))[0]:
        result.newest[oid] = (a, text)
    result.rows.write(_ROW.pack(j, offset, a, b, oid))


@dataclass
class Anomaly:
    size: int
    root: bytes
    label: str


def ordered(cps: Checkpoints, origin_id: int) -> tuple[int, list[Anomaly], list[TamperFinding]]:
    """Newest signed size, the out-of-order checkpoints, and the rollback findings."""
    newest, anomalies, findings = 0, list[Anomaly](), list[TamperFinding]()
    for j, offset, size, root in cps.rows_for(origin_id):
        if size < newest:
            if len(findings) < 16:
                findings.append(TamperFinding(TamperKind.ROLLBACK, None,
                                        f"{label(j, offset, size)} was written after a "
                                        f"checkpoint for size {newest}: an older checkpoint "
                                        "was replayed"))
            if len(anomalies) < MAX_ANOMALIES:
                anomalies.append(Anomaly(size, root, label(j, offset, size)))
        newest = max(newest, size)
    return newest, anomalies, findings


def in_order(cps: Checkpoints, origin_id: int) -> Iterator[tuple[int, bytes, str]]:
    """The checkpoints whose size does not go down, in file order."""
    newest = 0
    for j, offset, size, root in cps.rows_for(origin_id):
        if size >= newest:
            newest = size
            yield size, root, label(j, offset, size)
