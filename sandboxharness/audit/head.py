"""Where a writer resumes: the newest signed tree head and the byte offsets it ends at.

``LOG.state`` (JSON: compact range, offsets, last leaf) is written after every commit.
It is two things:

* a cache, accepted only when it matches the newest signed checkpoint (root and size),
  the last record line (leaf hash) and the file offsets - a compact range with a given
  root cannot be forged, so a wrong cache only ever costs a full re-hash;
* evidence: the size it names was signed once, so checkpoints signing less mean the
  checkpoints file lost entries, and it shows that records after the newest checkpoint
  are an interrupted append (see :mod:`.commit`). It is rewritten in place after the
  checkpoint is on disk, not fsynced: after a crash it may be behind (a lower bound) or
  torn (then it is ignored, with a warning, and the head is rebuilt from the files).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ..errors import AuditError
from . import storage
from .checkpoint import SidecarReader, SignedCheckpoint, parse_signed_checkpoint, split_sidecar
from .interface import AuditLimits, FormatError
from .keys import Signer
from .merkle import CompactRange, hash_leaf
from .note import SignatureMismatch, verified_keys


@dataclass
class Head:
    tree: CompactRange
    last_leaf: bytes | None
    last_len: int
    """Length of the last committed record line, without its newline."""
    origin: str | None
    """None for a new, empty log."""
    log_end: int
    """Where the committed records end (bytes); anything after is an unsigned tail."""
    cp_last: int
    cp_end: int
    """Where the newest checkpoint entry starts and ends in the sidecar."""

    def copy(self) -> Head:
        return Head(self.tree.copy(), self.last_leaf, self.last_len, self.origin,
                    self.log_end, self.cp_last, self.cp_end)


def empty_head(origin: str | None) -> Head:
    return Head(CompactRange(), None, 0, origin, 0, 0, 0)


def encode_state(head: Head) -> bytes:
    return json.dumps({
        "v": 1, "size": head.tree.size, "origin": head.origin,
        "stack": [[n, h.hex()] for n, h in head.tree.stack],
        "last_leaf": head.last_leaf.hex() if head.last_leaf else None,
        "last_len": head.last_len, "log_end": head.log_end, "cp_last": head.cp_last,
        "cp_end": head.cp_end}).encode()


def decode_state(data: bytes) -> Head | None:
    """The head a state file describes; None when it is not one."""
    try:
        s: Any = json.loads(data)
        tree = CompactRange([(int(n), bytes.fromhex(h)) for n, h in s["stack"]])
        last_leaf = bytes.fromhex(s["last_leaf"]) if s["last_leaf"] else None
        head = Head(tree, last_leaf, int(s["last_len"]), s["origin"], int(s["log_end"]),
                    int(s["cp_last"]), int(s["cp_end"]))
        if s.get("v") != 1 or tree.size != s["size"] or not isinstance(head.origin, str | None):
            return None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if (last_leaf is None) != (tree.size == 0) or (last_leaf and len(last_leaf) != 32):
        return None
    return head


def _checkpoint(text: str | None, signer: Signer, limits: AuditLimits,
                where: object) -> SignedCheckpoint:
    try:
        if text is None:
            raise FormatError("not a well-formed signed note")
        sc = parse_signed_checkpoint(text, limits)
        verified_keys(sc.note, [signer.public_key])  # other keys: signed before a rotation
    except SignatureMismatch:
        raise AuditError(f"{where}: the newest checkpoint's signature by this key does not "
                         "verify; refusing to append (run `audit verify`)") from None
    except FormatError as exc:
        raise AuditError(f"{where}: the newest checkpoint is malformed ({exc}); refusing to "
                         "append (run `audit verify`)") from None
    return sc


def head_from_state(head: Head, log_fd: int, cps_fd: int, signer: Signer,
                    *, limits: AuditLimits, where: tuple[object, object]) -> Head | None:
    """``head`` (from the state file) if the files agree with it, else None."""
    cp_size, log_size = os.fstat(cps_fd).st_size, os.fstat(log_fd).st_size
    if head.origin is None or head.tree.size == 0 or not (
            0 <= head.cp_last < head.cp_end <= cp_size <= head.cp_end + limits.max_note_bytes
            and 0 < head.last_len < head.log_end <= log_size):
        return None
    newest = split_sidecar(storage.pread(cps_fd, head.cp_end - head.cp_last, head.cp_last,
                                         where[1]), limits)
    after = split_sidecar(storage.pread(cps_fd, cp_size - head.cp_end, head.cp_end, where[1]),
                          limits)
    if len(newest.entries) != 1 or newest.torn_bytes or after.entries:
        return None
    try:
        sc = _checkpoint(newest.entries[0].text, signer, limits, where[1])
    except AuditError:
        return None  # let the slow path look at it (and refuse with the full story)
    cp = sc.checkpoint
    if (cp.size, cp.root, cp.origin) != (head.tree.size, head.tree.root(), head.origin):
        return None
    start = head.log_end - head.last_len - 1
    chunk = storage.pread(log_fd, head.last_len + 2, start - 1, where[0]) if start else \
        b"\n" + storage.pread(log_fd, head.last_len + 1, 0, where[0])
    if chunk[:1] != b"\n" or chunk[-1:] != b"\n" or hash_leaf(chunk[1:-1]) != head.last_leaf:
        return None
    return head


def _newest_entry(cps_fd: int, limits: AuditLimits, where: object) -> tuple[Any, int]:
    """The last entry of the sidecar (streamed) and where its complete part ends."""
    reader, last = SidecarReader(limits), None
    for chunk in storage.iter_chunks(cps_fd, os.fstat(cps_fd).st_size, where):
        entries = reader.feed(chunk)
        last = entries[-1] if entries else last
    tail, complete, _ = reader.finish()
    return (tail[-1] if tail else last), complete


def head_from_files(log_fd: int, cps_fd: int, signer: Signer, limits: AuditLimits,
                    where: tuple[object, object]) -> Head:
    """Re-read and re-hash the log (streamed); refuse when it does not match its newest
    checkpoint."""
    entry, cp_end = _newest_entry(cps_fd, limits, where[1])
    committed, origin, root, cp_last = 0, None, None, 0
    if entry is not None:
        sc = _checkpoint(entry.text, signer, limits, where[1])
        committed, root, origin = sc.checkpoint.size, sc.checkpoint.root, sc.checkpoint.origin
        cp_last = entry.offset
    tree, last, log_end, pending = CompactRange(), b"", 0, b""
    for chunk in storage.iter_chunks(log_fd, os.fstat(log_fd).st_size, where[0]):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            if tree.size == committed:
                break
            tree.append(hash_leaf(line))
            last, log_end = line, log_end + len(line) + 1
        if tree.size == committed:
            break
    if tree.size < committed:
        raise AuditError(f"{where[0]}: {tree.size} complete records but the newest checkpoint "
                         f"signs {committed}: records were removed; refusing to append "
                         "(run `audit verify`)")
    if root is not None and tree.root() != root:
        raise AuditError(f"{where[0]}: records do not match the newest signed checkpoint; "
                         "refusing to sign over them (run `audit verify`)")
    return Head(tree, hash_leaf(last) if committed else None, len(last) if committed else 0,
                origin, log_end, cp_last, cp_end)
