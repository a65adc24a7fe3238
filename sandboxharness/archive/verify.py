"""Is the archive what the signed audit log says it is?

``verify_against_log`` reads one snapshot of the log and its checkpoints (under the shared
lock writers respect), verifies it with the trusted public keys, and then, for every signed
record that names artifacts, re-hashes the archived verdict (its name is the record's
``verdict_sha256``) and every artifact the verdict names. ``verify_store`` re-hashes every
object without a log. Each problem is one finding; the archive is intact when there is none.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..audit import PublicKey
from ..audit import storage as audit_storage
from ..audit.interface import DEFAULT_LIMITS, FormatError
from ..audit.records import decode_record
from ..audit.verify import verify_snapshot
from ..errors import InputError
from .store import HASH, Archive


@dataclass(frozen=True)
class Finding:
    where: str
    """What is wrong where: ``record 3 artifact sources/k.py``, ``sha256/ab/...``, ``log``."""
    message: str

    def line(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class ArchiveReport:
    findings: list[Finding] = field(default_factory=list)
    objects: int = 0
    """Distinct objects re-hashed."""
    records: int = 0
    """Signed records read (with a log)."""
    unarchived: int = 0
    """Signed verdict records naming no artifacts (evaluated without an archive)."""
    unsigned: int = 0
    """Records after the newest signed checkpoint: not evidence, not checked."""

    @property
    def ok(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        if self.findings:
            return f"FAILED: {len(self.findings)} finding(s), {self.objects} object(s) checked"
        with_log = f" named by {self.records} signed record(s)" if self.records else ""
        extra = "".join([f"; {self.unarchived} record(s) name no artifacts" if self.unarchived
                         else "", f"; {self.unsigned} unsigned record(s) not checked"
                         if self.unsigned else ""])
        return f"OK: {self.objects} object(s){with_log} present and intact{extra}"


def verify_store(archive: Archive) -> ArchiveReport:
    """Re-hash every object; a stray file under ``sha256/`` is a finding too."""
    report = ArchiveReport()
    for digest, path in archive.objects():
        rel = path.relative_to(archive.root)
        if digest is None:
            report.findings.append(Finding(str(rel), "not an object of this layout"))
            continue
        report.objects += 1
        problem = archive.problem(digest)
        if problem is not None:
            report.findings.append(Finding(str(rel), problem))
    return report


def _snapshot(log: Path) -> tuple[bytes, bytes | None]:
    """The log and its checkpoints as one consistent pair (writers commit under the lock)."""
    cap = DEFAULT_LIMITS.max_view_bytes
    fd = audit_storage.open_input(log, what="audit log")
    cp_path = log.with_name(log.name + ".checkpoints")
    cp_fd = None
    try:
        audit_storage.flock(fd, fcntl.LOCK_SH, log)
        cp_fd = audit_storage.open_optional(cp_path, what="checkpoints file")
        sizes = [os.fstat(f).st_size for f in (fd, cp_fd) if f is not None]
        if max(sizes) > cap:
            raise InputError(f"over {cap} bytes: verify the log with `audit verify`, then the "
                             "archive in parts", where=str(log))
        data = b"".join(audit_storage.iter_chunks(fd, sizes[0], log))
        cps = (b"".join(audit_storage.iter_chunks(cp_fd, sizes[1], cp_path))
               if cp_fd is not None else None)
        return data, cps
    finally:
        os.close(fd)
        if cp_fd is not None:
            os.close(cp_fd)


def signed_records(log: Path, keys: Sequence[PublicKey]
                   ) -> tuple[list[dict[str, Any]], list[Finding], int]:
    """(the signed records, what is wrong with the log, unsigned records after them).
    Records are returned only from a log that verified."""
    data, cps = _snapshot(log)
    result = verify_snapshot(data, cps, keys)
    if not result.ok:
        return [], [Finding("log", f.line()) for f in result.findings], 0
    lines = data.split(b"\n")
    lines = lines[:-1] if lines and lines[-1] == b"" else lines
    records = []
    for line in lines[:result.size]:
        try:
            records.append(decode_record(line))
        except FormatError as exc:  # verified just now: cannot happen short of a bug
            return [], [Finding("log", f"record {len(records)}: {exc}")], 0
    return records, [], max(0, len(lines) - result.size)


def named_objects(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(what, hash) of everything one record vouches for. A verdict record that names
    artifacts: its verdict object and each artifact. An event record (a campaign round, a
    gateway call): each entry of its body's ``artifacts`` map (e.g. the task bundle)."""
    body = record.get("verdict") if "verdict" in record else record.get("event")
    artifacts = body.get("artifacts") if isinstance(body, dict) else None
    if not isinstance(artifacts, dict) or not artifacts:
        return []
    out = [("verdict", str(record.get("verdict_sha256")))] if "verdict" in record else []
    out += [(f"artifact {name}", str(h)) for name, h in sorted(artifacts.items())]
    return out


def verify_against_log(archive: Archive, log: Path, keys: Sequence[PublicKey]) -> ArchiveReport:
    records, log_findings, unsigned = signed_records(log, keys)
    report = ArchiveReport(findings=list(log_findings), records=len(records), unsigned=unsigned)
    seen: dict[str, str | None] = {}
    for record in records:
        named = named_objects(record)
        if not named and "verdict" in record:
            report.unarchived += 1
        for what, digest in named:
            if not HASH.match(digest):
                report.findings.append(Finding(f"record {record['index']} {what}",
                                               f"{digest[:80]!r} is not a sha256 hash"))
                continue
            if digest not in seen:
                seen[digest] = archive.problem(digest)
            if seen[digest] is not None:
                report.findings.append(Finding(f"record {record['index']} {what}",
                                               f"{digest} {seen[digest]}"))
    report.objects = len(seen)
    return report
