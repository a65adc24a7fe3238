"""The append-only, file-backed audit log (writer side).

Files next to ``LOG`` (JSON lines, one canonical record per line):

* ``LOG.checkpoints`` - one signed checkpoint per append (see :mod:`.checkpoint`)
* ``LOG.lock``        - ``flock`` target serialising writers across processes
* ``LOG.torn``        - bytes cut off by crash repair, one JSON line each (kept as evidence)
* ``LOG.state``       - cache of the tree head so an append is O(log n), see :mod:`.head`

An append, under the exclusive lock: check the log against its newest checkpoint (the
writer never signs over a log it cannot vouch for), repair a torn tail left by a crashed
writer, write the record line(s), fsync, write and fsync the signed checkpoint (this is
the commit point), fsync the directory when a file was created, return.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from ..errors import AuditError
from ..models import Verdict
from . import storage
from .checkpoint import (
    Checkpoint,
    SignedCheckpoint,
    parse_signed_checkpoint,
    sign_checkpoint,
    split_sidecar,
)
from .head import Head, head_from_files, head_from_state, save_state
from .interface import DEFAULT_LIMITS, AppendResult, AuditLimits, FormatError
from .keys import Signer
from .merkle import hash_leaf
from .records import build_record, decode_record, encode_record, is_torn_record, leaf_tag

ORIGIN_PREFIX = "sandboxharness.dev/audit/"


def sidecar(log_path: Path, suffix: str) -> Path:
    return log_path.with_name(log_path.name + suffix)


def split_lines(data: bytes) -> tuple[list[bytes], int]:
    """Complete lines (without their newline) and the length of an incomplete last line."""
    end = data.rfind(b"\n") + 1
    return data[:end].split(b"\n")[:-1], len(data) - end


def _now() -> datetime:
    return datetime.now(UTC)


class AuditLog:
    """Writer for one log. Safe across processes (``flock``); one instance per call is fine."""

    def __init__(self, path: Path, *, limits: AuditLimits = DEFAULT_LIMITS,
                 origin: str | None = None, clock: Callable[[], datetime] = _now) -> None:
        self.path = path
        self.limits = limits
        self.origin = origin
        self.clock = clock
        self.checkpoints_path = sidecar(path, ".checkpoints")
        self.lock_path = sidecar(path, ".lock")
        self.torn_path = sidecar(path, ".torn")
        self.state_path = sidecar(path, ".state")

    def append(self, verdicts: Sequence[Verdict], signer: Signer) -> AppendResult:
        """Append verdicts as one batch under one new checkpoint; durable on return."""
        if not verdicts:
            raise ValueError("nothing to append")
        if len(verdicts) > self.limits.max_batch:
            raise AuditError(f"a batch holds at most {self.limits.max_batch} verdicts")
        if not self.path.parent.is_dir():
            raise AuditError(f"{self.path.parent}: directory does not exist")
        with storage.locked(self.lock_path):
            cps_existed = self.checkpoints_path.exists()
            log = storage.AppendFile(self.path)
            cps = storage.AppendFile(self.checkpoints_path)
            try:
                head = (head_from_state(self.state_path, log, cps, signer, self.limits)
                        or head_from_files(log, cps, signer, self.limits, cps_existed))
                if self.origin is not None and head.origin not in (None, self.origin):
                    raise AuditError(f"{self.path}: log origin is {head.origin}, "
                                     f"not {self.origin}")
                self._repair(log, cps, head)
                result = self._write(log, cps, head, verdicts, signer)
            finally:
                log.close()
                cps.close()
            save_state(self.state_path, head)
            return result

    def _repair(self, log: storage.AppendFile, cps: storage.AppendFile, head: Head) -> None:
        """Move a crashed writer's torn tail to LOG.torn - only what a crash can leave."""
        size = os.fstat(log.fd).st_size
        if size > head.log_end:
            tail = os.pread(log.fd, size - head.log_end, head.log_end)
            lines, partial = split_lines(tail)
            if partial and not is_torn_record(tail[len(tail) - partial:]):
                raise AuditError(f"{self.path}: the incomplete last line is not a record of "
                                 "ours; refusing to append (run `audit verify`)")
            self._check_unsigned_tail(lines, head.tree.size)
            storage.quarantine(self.torn_path, self.path, head.log_end, tail)
            log.truncate(head.log_end)
        size = os.fstat(cps.fd).st_size
        if size > head.cp_end:
            tail = os.pread(cps.fd, size - head.cp_end, head.cp_end)
            storage.quarantine(self.torn_path, self.checkpoints_path, head.cp_end, tail)
            cps.truncate(head.cp_end)

    def _check_unsigned_tail(self, extra: list[bytes], committed: int) -> None:
        """Only repair what a crashed writer of ours can leave: <= one batch of records."""
        if len(extra) > self.limits.max_batch:
            raise AuditError(f"{self.path}: {len(extra)} unsigned records after the newest "
                             "checkpoint - more than a crash can leave; refusing to append")
        for i, line in enumerate(extra):
            try:
                ok = decode_record(line)["index"] == committed + i
            except FormatError:
                ok = False
            if not ok:
                raise AuditError(f"{self.path}: line {committed + i + 1} is not an audit "
                                 "record of this log; refusing to append (run `audit verify`)")

    def _write(self, log: storage.AppendFile, cps: storage.AppendFile, head: Head,
               verdicts: Sequence[Verdict], signer: Signer) -> AppendResult:
        """Write records, fsync, write the signed checkpoint, fsync; advance ``head``."""
        now = self.clock()
        origin = head.origin or ORIGIN_PREFIX + secrets.token_hex(8)
        first, lines, prev = head.tree.size, [], head.last_leaf
        tree = head.tree.copy()
        for i, verdict in enumerate(verdicts):
            line = encode_record(build_record(verdict, index=first + i, prev_leaf=prev,
                                              recorded_at=now))
            if len(line) > self.limits.max_record_bytes:
                raise AuditError(f"record is {len(line)} bytes, over the "
                                 f"{self.limits.max_record_bytes}-byte limit")
            lines.append(line)
            prev = hash_leaf(line)
            tree.append(prev)
        log.append(b"".join(line + b"\n" for line in lines))
        text = sign_checkpoint(Checkpoint(origin, tree.size, tree.root()), signer)
        cps.append(text.encode() + b"\n")
        if log.created or cps.created:
            storage.fsync_dir(self.path.parent)
        last_leaf = hash_leaf(lines[-1])
        head.tree, head.last_leaf, head.last_len, head.origin = (tree, last_leaf, len(lines[-1]),
                                                                  origin)
        head.log_end = os.fstat(log.fd).st_size
        head.cp_last, head.cp_end = head.cp_end, os.fstat(cps.fd).st_size
        return AppendResult(index=tree.size - 1, leaf_hash=leaf_tag(last_leaf),
                            checkpoint_text=text,
                            tree_size=tree.size, origin=origin,
                            indices=tuple(range(first, tree.size)))


def read_log(log_path: Path, limits: AuditLimits) -> tuple[list[bytes], list[SignedCheckpoint]]:
    """Complete lines of the log and the parseable (unverified) checkpoints."""
    with storage.locked(sidecar(log_path, ".lock"), shared=True):
        data = storage.read_bytes(log_path, limits.max_log_bytes, what="audit log")
        cps = storage.read_optional(sidecar(log_path, ".checkpoints"), limits.max_checkpoints_bytes,
                                 what="checkpoints file") or b""
    # unverified: parse what parses; `audit verify` is the one that judges
    parsed = []
    for entry in split_sidecar(cps, limits).entries:
        try:
            if entry.text is not None:
                parsed.append(parse_signed_checkpoint(entry.text, limits))
        except FormatError:
            continue
    return split_lines(data)[0], parsed


def record_verdict(verdict: Verdict, log_path: Path, signer: Signer) -> AppendResult:
    """Append one verdict to the log at ``log_path`` (created on first use) and sign a new
    checkpoint. Returns only once record and checkpoint are on disk (fsync)."""
    return AuditLog(log_path).append([verdict], signer)
