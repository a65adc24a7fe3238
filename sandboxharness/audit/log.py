"""The append-only, file-backed audit log (writer side).

Files next to ``LOG`` (JSON lines, one canonical record per line):

* ``LOG.checkpoints`` - one signed checkpoint per commit (see :mod:`.checkpoint`)
* ``LOG.state``       - the newest head: cache and evidence (see :mod:`.head`)
* ``LOG.torn``        - bytes cut off by crash repair, one JSON line each (kept as evidence)
* ``LOG.spool/``      - batches other processes queued while one held the lock
* ``LOG.witness``     - checkpoints cosigned by a witness (``audit witness``)

Writers lock the log file itself (``flock``). Group commit: concurrent appends - threads
of one process through an in-memory queue, processes through ``LOG.spool`` - share one
commit (one write + fsync of records, one signed checkpoint + fsync) of up to
``max_batch`` records. Every append returns only once its records and a checkpoint
covering them are on disk.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import AuditError, InputError
from ..models import Verdict
from . import storage
from .checkpoint import SignedCheckpoint, parse_signed_checkpoint, split_sidecar
from .commit import ORIGIN_PREFIX, Config, Writer, split_lines
from .interface import DEFAULT_LIMITS, AppendResult, AuditLimits, FormatError
from .keys import Signer
from .records import Prepared, prepare, prepare_event

__all__ = ["ORIGIN_PREFIX", "AuditLog", "read_log", "record_event", "record_verdict",
           "sidecar", "split_lines"]

_SHELL_BYTES = 1024  # the record's fields around the verdict, generously


def sidecar(log_path: Path, suffix: str) -> Path:
    return log_path.with_name(log_path.name + suffix)


def _now() -> datetime:
    return datetime.now(UTC)


class _Group:
    def __init__(self, items: list[Prepared], signer: Signer, cfg: Config) -> None:
        self.items, self.signer, self.cfg = items, signer, cfg
        self.result: AppendResult | None = None
        self.error: BaseException | None = None
        self.done = False


class _Queue:
    """Appends of this process to one log, waiting for the thread that commits them."""

    def __init__(self, path: Path) -> None:
        self.cond = threading.Condition()
        self.pending: list[_Group] = []
        self.busy = False
        self.writer = Writer(path)

    def run(self, group: _Group) -> AppendResult:
        with self.cond:
            self.pending.append(group)
        while True:
            with self.cond:
                while self.busy and not group.done:
                    self.cond.wait()
                if group.done:
                    break
                self.busy = True
                batch = self._take()
            try:
                results = self.writer.commit([g.items for g in batch], batch[0].signer,
                                             batch[0].cfg)
                for g, r in zip(batch, results, strict=True):
                    g.result = r
            except BaseException as exc:  # every append of the batch fails the same way
                for g in batch:
                    g.error = exc
            finally:
                with self.cond:
                    for g in batch:
                        g.done = True
                    self.busy = False
                    self.cond.notify_all()
        if group.error is not None:
            raise group.error
        if group.result is None:  # pragma: no cover - a commit sets one or the other
            raise AuditError(f"{self.writer.path}: the append was not committed")
        return group.result

    def _take(self) -> list[_Group]:
        """The oldest append and those that can share its checkpoint (same key and
        settings), up to ``max_batch`` records."""
        first = self.pending[0]
        batch: list[_Group] = []
        rest: list[_Group] = []
        room = first.cfg.limits.max_batch
        for g in self.pending:
            fits = (g.signer.key_id, g.cfg) == (first.signer.key_id, first.cfg)
            if fits and (not batch or len(g.items) <= room):
                batch.append(g)
                room -= len(g.items)
            else:
                rest.append(g)
        self.pending = rest
        return batch


_QUEUES: dict[str, _Queue] = {}
_QUEUES_LOCK = threading.Lock()


def _queue(path: Path) -> _Queue:
    key = f"{os.getpid()}:{os.path.realpath(path.parent)}/{path.name}"  # a fork starts afresh
    with _QUEUES_LOCK:
        q = _QUEUES.get(key)
        if q is None:
            q = _QUEUES[key] = _Queue(path)
        return q


class AuditLog:
    """Writer for one log. Safe across threads and processes; one instance per call is
    fine (appends to one log from one process share a queue whatever the instance)."""

    def __init__(self, path: Path, *, limits: AuditLimits = DEFAULT_LIMITS,
                 origin: str | None = None, clock: Callable[[], datetime] = _now) -> None:
        self.path = path
        self.limits = limits
        self.origin = origin
        self.clock = clock
        self.checkpoints_path = sidecar(path, ".checkpoints")
        self.torn_path = sidecar(path, ".torn")
        self.state_path = sidecar(path, ".state")

    def _prepare(self, verdicts: Sequence[Verdict]) -> list[Prepared]:
        items = [prepare(v) for v in verdicts]  # canonicalised here, outside any lock
        for p in items:
            if len(p.verdict_bytes) + _SHELL_BYTES > self.limits.max_record_bytes:
                raise AuditError(f"record is about {len(p.verdict_bytes) + _SHELL_BYTES} "
                                 f"bytes, over the {self.limits.max_record_bytes}-byte limit")
        return items

    def append(self, verdicts: Sequence[Verdict], signer: Signer) -> AppendResult:
        """Append verdicts as one batch (consecutive records under one checkpoint, maybe
        shared with concurrent appends); durable on return."""
        if not verdicts:
            raise ValueError("nothing to append")
        if len(verdicts) > self.limits.max_batch:
            raise AuditError(f"a batch holds at most {self.limits.max_batch} verdicts")
        if not self.path.parent.is_dir():
            raise AuditError(f"{self.path.parent}: directory does not exist")
        cfg = Config(self.limits, self.origin, self.clock)
        return _queue(self.path).run(_Group(self._prepare(verdicts), signer, cfg))

    def append_event(self, kind: str, subject: str, event: dict[str, Any],
                     signer: Signer) -> AppendResult:
        """Append one event record (FORMAT.md, "Event records"); durable on return."""
        item = prepare_event(kind, subject, event)
        if len(item.verdict_bytes) + _SHELL_BYTES > self.limits.max_record_bytes:
            raise AuditError(f"event is about {len(item.verdict_bytes) + _SHELL_BYTES} bytes, "
                             f"over the {self.limits.max_record_bytes}-byte limit")
        if not self.path.parent.is_dir():
            raise AuditError(f"{self.path.parent}: directory does not exist")
        cfg = Config(self.limits, self.origin, self.clock)
        return _queue(self.path).run(_Group([item], signer, cfg))

    def append_many(self, verdicts: Sequence[Verdict], signer: Signer) -> list[AppendResult]:
        """Append any number of verdicts, ``max_batch`` per commit; durable on return (one
        writer batching its own records: the fastest way in)."""
        step = self.limits.max_batch
        return [self.append(verdicts[i:i + step], signer) for i in range(0, len(verdicts), step)]


def read_log(log_path: Path, limits: AuditLimits) -> tuple[list[bytes], list[SignedCheckpoint]]:
    """Complete lines of the log and the parseable (unverified) checkpoints, in memory
    (for ``show``/``export``, up to ``max_view_bytes``; verification streams)."""
    fd = storage.open_input(log_path, what="audit log")
    try:
        storage.flock(fd, fcntl.LOCK_SH, log_path)
        data = _read_capped(fd, log_path, limits.max_view_bytes, "audit log")
        cfd = storage.open_optional(sidecar(log_path, ".checkpoints"), what="checkpoints file")
        cps = b""
        if cfd is not None:
            try:
                cps = _read_capped(cfd, sidecar(log_path, ".checkpoints"),
                                   limits.max_view_bytes, "checkpoints file")
            finally:
                os.close(cfd)
    finally:
        os.close(fd)
    parsed = []
    for entry in split_sidecar(cps, limits).entries:
        try:
            if entry.text is not None:
                parsed.append(parse_signed_checkpoint(entry.text, limits))
        except FormatError:
            continue
    return split_lines(data)[0], parsed


def _read_capped(fd: int, path: Path, cap: int, what: str) -> bytes:
    size = os.fstat(fd).st_size
    if size > cap:
        raise InputError(f"{what} is {size} bytes, over the {cap}-byte limit for reading it "
                         "whole", where=str(path))
    return b"".join(storage.iter_chunks(fd, size, path))


def record_verdict(verdict: Verdict, log_path: Path, signer: Signer) -> AppendResult:
    """Append one verdict to the log at ``log_path`` (created on first use) and sign a new
    checkpoint. Returns only once record and checkpoint are on disk (fsync)."""
    return AuditLog(log_path).append([verdict], signer)


def record_event(kind: str, subject: str, event: dict[str, Any], log_path: Path,
                 signer: Signer) -> AppendResult:
    """Append one event (``event`` carries ``kind`` and ``subject`` too) and sign a new
    checkpoint; durable on return."""
    return AuditLog(log_path).append_event(kind, subject, event, signer)
