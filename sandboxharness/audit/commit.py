"""One commit of the log, under an exclusive ``flock`` on the log file itself (no lock
file a third party could delete; a log file replaced while a writer waited is noticed).

A commit: find the newest signed head (in-process cache, ``LOG.state``, or a full
re-hash - never signing over records it cannot vouch for); refuse when the checkpoints
file is missing or lost entries; repair only what a crashed writer leaves; take the
batches other processes queued (:mod:`.spool`); write all records in one ``write``,
fsync; write the signed checkpoint, fsync (the commit point); answer; save the state.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..errors import AuditError
from . import storage
from .checkpoint import Checkpoint, sign_checkpoint
from .head import Head, decode_state, empty_head, encode_state, head_from_files, head_from_state
from .interface import AppendResult, AuditLimits, AuditRepairWarning, FormatError, StateWarning
from .keys import Signer
from .merkle import hash_leaf
from .records import Prepared, assemble, decode_record, is_torn_record, leaf_tag
from .spool import Spool, Ticket, check_spool_dir

ORIGIN_PREFIX = "sandboxharness.dev/audit/"
_CONTENTION_S = 0.5


@dataclass(frozen=True)
class Config:
    limits: AuditLimits
    origin: str | None
    clock: Callable[[], datetime]


def split_lines(data: bytes) -> tuple[list[bytes], int]:
    """Complete lines (without their newline) and the length of an incomplete last line."""
    end = data.rfind(b"\n") + 1
    return data[:end].split(b"\n")[:-1], len(data) - end


class Writer:
    """This process's handle on one log: the head it committed last (a cache that is
    used only while every file is exactly as that commit left it)."""

    def __init__(self, path: Path) -> None:
        self.path, self.name = path, path.name
        self.names = {k: path.name + k for k in (".checkpoints", ".state", ".torn")}
        self.pid = os.getpid()
        self.cache: tuple[Head, tuple[object, ...]] | None = None
        self.contended = 0.0
        """When another writer last held the lock: until a while after, queue first."""

    def commit(self, groups: list[list[Prepared]], signer: Signer, cfg: Config
               ) -> list[AppendResult]:
        """Write ``groups`` (one AppendResult each) - or have the lock holder write them."""
        if self.pid != os.getpid():  # a forked child starts from the files
            self.pid, self.cache = os.getpid(), None
        d = storage.LogDir(self.path.parent)
        try:
            fd = self._open_log(d)
            try:
                return self._locked(d, fd, groups, signer, cfg)
            finally:
                os.close(fd)  # releases the lock
        finally:
            d.close()

    def _open_log(self, d: storage.LogDir) -> int:
        if d.lstat(self.name) is None:
            for sidecar in (self.names[".checkpoints"], self.names[".state"]):
                st = d.lstat(sidecar)
                if st is not None and st.st_size:
                    raise AuditError(f"{self.path}: missing, but {d.where(sidecar)} exists; "
                                     "refusing to start a new log over the old one's "
                                     "signatures (restore the log; run `audit verify`)")
        return d.open(self.name, os.O_RDWR | os.O_APPEND | os.O_CREAT,
                      action="cannot open the log for append")

    def _locked(self, d: storage.LogDir, fd: int, groups: list[list[Prepared]],
                signer: Signer, cfg: Config) -> list[AppendResult]:
        spool = Spool(d, self.name)
        # Under contention, queue before taking the lock: whoever gets it next then sees
        # every waiting batch (taking a free lock first would commit alone, again and again).
        busy = time.monotonic() - self.contended < _CONTENTION_S
        if busy or not storage.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, self.path):
            self.contended = time.monotonic()
            try:
                ticket = spool.submit(groups, signer)  # the lock holder may write it for us
            except AuditError:
                ticket = None  # no spool here (permissions): just wait for the lock
            try:
                if ticket is None:
                    storage.flock(fd, fcntl.LOCK_EX, self.path)
                else:  # poll: an answer needs no lock, so the holder's next batch is full
                    done = self._wait(fd, spool, ticket, signer, len(groups))
                    if done is not None:
                        return done
                if ticket is not None:
                    done = spool.take(ticket, signer, len(groups))
                    if done is not None:
                        return done
            finally:
                if ticket is not None:
                    spool.withdraw(ticket)  # unanswered: this writer leads with its own
        st, own = d.lstat(self.name), os.fstat(fd)
        if st is None or (st.st_ino, st.st_dev) != (own.st_ino, own.st_dev):
            self.cache = None
            raise AuditError(f"{self.path}: the log file was removed or replaced while this "
                             "writer waited for its lock; refusing to append "
                             "(run `audit verify`)")
        return self._lead(d, fd, spool, groups, signer, cfg=cfg)

    def _wait(self, fd: int, spool: Spool, ticket: Ticket, signer: Signer, count: int
              ) -> list[AppendResult] | None:
        """Until the lock is ours (None) or a holder answered the queued batch."""
        delay = 0.0001
        while not storage.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, self.path):
            done = spool.take(ticket, signer, count)
            if done is not None:
                return done
            time.sleep(delay)
            delay = min(delay * 1.5, 0.002)
        return None

    def _lead(self, d: storage.LogDir, fd: int, spool: Spool, groups: list[list[Prepared]],
              signer: Signer, *, cfg: Config) -> list[AppendResult]:
        check_spool_dir(d, self.name)
        cps_name = self.names[".checkpoints"]
        log_size, cps_st = os.fstat(fd).st_size, d.lstat(cps_name)
        if cps_st is None and log_size:
            raise AuditError(f"{self.path}: holds {log_size} bytes of records but no "
                             f"{cps_name}; refusing to append to a log without its "
                             "signatures (restore it; run `audit verify`)")
        cps_fd = d.open(cps_name, os.O_RDWR | os.O_APPEND | os.O_CREAT,
                        action="cannot open the checkpoints for append")
        try:
            head, evidence = self._head(d, fd, cps_fd, signer, cfg)
            if cfg.origin is not None and head.origin not in (None, cfg.origin):
                raise AuditError(f"{self.path}: log origin is {head.origin}, not {cfg.origin}")
            self._repair(d, fd, cps_fd, head, evidence=evidence, limits=cfg.limits)
            if head.origin is None:  # a new log: its state exists before its first record
                head = empty_head(cfg.origin or ORIGIN_PREFIX + secrets.token_hex(8))
                d.write_new(self.names[".state"], encode_state(head), sync=True)
            others = spool.collect(signer, cfg.limits.max_batch - sum(map(len, groups)))
            batches = groups + [g for r in others for g in r.groups]
            results = self._write(d, fd, cps_fd, head, batches, signer=signer, cfg=cfg,
                                  created=cps_st is None)
        finally:
            os.close(cps_fd)
        k = len(groups)
        for r in others:
            spool.answer(r, results[k:k + len(r.groups)], signer)
            k += len(r.groups)
        return results[:len(groups)]

    def _fingerprint(self, d: storage.LogDir, fd: int, cps_fd: int) -> tuple[object, ...]:
        st, cps, state = os.fstat(fd), os.fstat(cps_fd), d.lstat(self.names[".state"])
        return (st.st_ino, st.st_size, cps.st_ino, cps.st_size,
                state and (state.st_ino, state.st_size, state.st_mtime_ns))

    def _head(self, d: storage.LogDir, fd: int, cps_fd: int, signer: Signer,
              cfg: Config) -> tuple[Head, bool]:
        """The newest signed head, and whether LOG.state vouches that an unsigned tail is an
        interrupted append."""
        if self.cache is not None and self.cache[1] == self._fingerprint(d, fd, cps_fd):
            return self.cache[0].copy(), True
        where = (self.path, d.where(self.names[".checkpoints"]))
        state_name = self.names[".state"]
        d.lstat(state_name)  # refuses a symlink
        raw = d.read_optional(state_name, 1 << 20)
        state = decode_state(raw) if raw is not None else None
        head = (head_from_state(state, fd, cps_fd, signer, limits=cfg.limits, where=where)
                if state else None)
        if head is None:
            head = head_from_files(fd, cps_fd, signer, cfg.limits, where)
        if state is not None and state.origin is not None and head.origin is not None \
                and state.origin != head.origin:
            state = None  # the state of another log: no evidence
        if state is not None and state.tree.size > head.tree.size:
            raise AuditError(f"{where[1]}: signs {head.tree.size} records, but "
                             f"{d.where(state_name)} shows {state.tree.size} were signed: "
                             "checkpoints were removed or the file was replaced; refusing "
                             "to append (restore it; run `audit verify`)")
        if state is None and head.tree.size:
            what = "missing" if raw is None else "damaged"
            warnings.warn(f"{d.where(state_name)} is {what}: head rebuilt from the log and its "
                          "newest checkpoint (verified)", StateWarning, stacklevel=6)
        return head, state is not None

    def _repair(self, d: storage.LogDir, fd: int, cps_fd: int, head: Head, *, evidence: bool,
                limits: AuditLimits) -> None:
        """Move a crashed writer's torn tail to LOG.torn - only what a crash can leave,
        and complete records only when LOG.state shows they are an interrupted append."""
        size, torn = os.fstat(fd).st_size, self.names[".torn"]
        if size > head.log_end:
            tail = storage.pread(fd, size - head.log_end, head.log_end, self.path)
            lines, partial = split_lines(tail)
            if partial and not is_torn_record(tail[len(tail) - partial:]):
                raise AuditError(f"{self.path}: the incomplete last line is not a record of "
                                 "ours; refusing to append (run `audit verify`)")
            if lines and not evidence:
                raise AuditError(f"{self.path}: {len(lines)} complete record(s) after the "
                                 f"newest signed checkpoint and no valid {self.names['.state']} "
                                 "to show they are an interrupted append; refusing to move "
                                 "them aside (run `audit verify`)")
            self._check_unsigned_tail(lines, head, limits)
            storage.quarantine(d, torn, self.name, head.log_end, tail)
            storage.truncate(fd, head.log_end, self.path)
            warnings.warn(f"{self.path}: an interrupted append ({len(lines)} unsigned "
                          f"record(s), {partial} bytes of a partial one) was moved to "
                          f"{d.where(torn)}", AuditRepairWarning, stacklevel=6)
        size = os.fstat(cps_fd).st_size
        if size > head.cp_end:
            where = d.where(self.names[".checkpoints"])
            tail = storage.pread(cps_fd, size - head.cp_end, head.cp_end, where)
            storage.quarantine(d, torn, self.names[".checkpoints"], head.cp_end, tail)
            storage.truncate(cps_fd, head.cp_end, where)
            warnings.warn(f"{where}: {len(tail)} bytes of an interrupted checkpoint write were "
                          f"moved to {d.where(torn)}", AuditRepairWarning, stacklevel=6)

    def _check_unsigned_tail(self, extra: list[bytes], head: Head, limits: AuditLimits) -> None:
        if len(extra) > limits.max_batch:
            raise AuditError(f"{self.path}: {len(extra)} unsigned records after the newest "
                             "checkpoint - more than a crash can leave; refusing to append")
        prev, committed = head.last_leaf, head.tree.size
        for i, line in enumerate(extra):
            try:
                rec = decode_record(line)
                ok = rec["index"] == committed + i and rec["prev"] == (
                    leaf_tag(prev) if prev else "sha256:" + "0" * 64)
            except FormatError:
                ok = False
            if not ok:
                raise AuditError(f"{self.path}: line {committed + i + 1} is not an audit "
                                 "record of this log; refusing to append (run `audit verify`)")
            prev = hash_leaf(line)

    def _write(self, d: storage.LogDir, fd: int, cps_fd: int, head: Head,
               groups: Sequence[list[Prepared]], *, signer: Signer, cfg: Config,
               created: bool) -> list[AppendResult]:
        now, origin = cfg.clock(), head.origin or ""
        tree, prev = head.tree.copy(), head.last_leaf
        lines: list[bytes] = []
        spans: list[tuple[int, int, bytes]] = []
        for items in groups:
            first = tree.size
            for p in items:
                line = assemble(p, index=tree.size, prev_leaf=prev, recorded_at=now)
                if len(line) > cfg.limits.max_record_bytes:
                    raise AuditError(f"record is {len(line)} bytes, over the "
                                     f"{cfg.limits.max_record_bytes}-byte limit")
                lines.append(line)
                prev = hash_leaf(line)
                tree.append(prev)
            spans.append((first, tree.size, prev or b""))
        cps_where = d.where(self.names[".checkpoints"])
        try:
            storage.append(fd, b"".join(line + b"\n" for line in lines), self.path)
            text = sign_checkpoint(Checkpoint(origin, tree.size, tree.root()), signer)
            storage.append(cps_fd, text.encode() + b"\n", cps_where)
        except AuditError:
            self._abort(fd, cps_fd, head)
            raise
        if created:
            d.fsync()
        new = Head(tree, prev, len(lines[-1]), origin, os.fstat(fd).st_size, head.cp_end,
                   os.fstat(cps_fd).st_size)
        try:
            d.overwrite(self.names[".state"], encode_state(new))
        except AuditError as exc:  # committed already: a stale state only costs a re-hash
            warnings.warn(f"could not save the head cache: {exc}", StateWarning, stacklevel=6)
        self.cache = (new, self._fingerprint(d, fd, cps_fd))
        return [AppendResult(index=end - 1, leaf_hash=leaf_tag(leaf), checkpoint_text=text,
                             tree_size=tree.size, origin=origin, indices=tuple(range(a, end)))
                for a, end, leaf in spans]

    def _abort(self, fd: int, cps_fd: int, head: Head) -> None:
        """A write failed (disk full...): take the batch back out, best effort - what stays
        is a torn tail the next append repairs."""
        self.cache = None
        for f, end in ((cps_fd, head.cp_end), (fd, head.log_end)):
            try:
                os.ftruncate(f, end)
                os.fsync(f)
            except OSError:
                pass
