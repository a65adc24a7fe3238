"""Garbage collection that never deletes evidence.

Kept, always: every object a signed record of the given audit logs names (its verdict and
each artifact), read only from logs that verify against the trusted keys (a log that does not
verify stops the collection before anything is deleted). Kept while recent: an archived
verdict no signed record names yet, with its artifacts, and any object used within the
retention window (an evaluation in progress, a record not yet appended). Deleted: the rest.
Files that are not objects of the layout are left alone (``archive verify`` reports them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...audit import PublicKey
from ...errors import InputError, VerificationError
from ..refs import load_verdict, remove_ref, verdict_refs
from ..store import Archive, ArchiveIntegrityError
from ..verify import named_objects, signed_records


@dataclass
class GcResult:
    signed: int = 0
    """Objects kept because a signed record names them."""
    recent: int = 0
    """Objects kept because they are within the retention window."""
    deleted: list[str] = field(default_factory=list)
    freed_bytes: int = 0
    refs_removed: int = 0
    dry_run: bool = False

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        return (f"gc: kept {self.signed} object(s) named by signed records and {self.recent} "
                f"recent one(s); {verb} {len(self.deleted)} ({self.freed_bytes} bytes) and "
                f"{self.refs_removed} verdict ref(s)")


def protected(logs: Sequence[Path], keys: Sequence[PublicKey]) -> set[str]:
    """Every hash a signed record of ``logs`` vouches for; a log that fails verification
    raises (nothing may be deleted on the word of a tampered log)."""
    if not logs:
        raise InputError("gc needs the audit log(s) whose records the archive serves "
                         "(--audit-log)")
    keep: set[str] = set()
    for log in logs:
        records, findings, _ = signed_records(log, keys)
        if findings:
            raise VerificationError(f"{log} does not verify, nothing deleted: "
                                    f"{findings[0].line()}")
        for record in records:
            if "verdict_sha256" in record:  # archived even when it names no artifacts
                keep.add(str(record["verdict_sha256"]))
            keep.update(h for _, h in named_objects(record))
    return keep


def collect_garbage(archive: Archive, logs: Sequence[Path], keys: Sequence[PublicKey], *,
                    keep_s: float, dry_run: bool = False, now: float | None = None) -> GcResult:
    signed = protected(logs, keys)
    now = time.time() if now is None else now
    result = GcResult(dry_run=dry_run)

    def recent(digest: str) -> bool:
        try:
            return now - archive.path_of(digest).lstat().st_mtime < keep_s
        except FileNotFoundError:
            return False

    with archive.writing(exclusive=True):
        live = set(signed)
        for digest in verdict_refs(archive):
            if digest in signed:
                continue
            if recent(digest):  # not signed yet: kept whole while it may still be
                try:
                    live.add(digest)
                    live.update(load_verdict(archive, digest).artifacts.values())
                except ArchiveIntegrityError:
                    pass  # what it named is judged by its own age below
                continue
            result.refs_removed += 1
            if not dry_run:
                remove_ref(archive, digest)
        for name, _path in archive.objects():
            if name is None:
                continue
            if name in signed:
                result.signed += 1
            elif name in live or recent(name):
                result.recent += 1
            else:
                result.deleted.append(name)
                result.freed_bytes += (archive.path_of(name).lstat().st_size if dry_run
                                       else archive.remove(name))
    return result
