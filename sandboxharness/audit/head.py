"""Where a writer resumes: the newest signed tree head and the byte offsets it ends at.

Fast path: ``LOG.state``, a cache (JSON: compact range, offsets, last leaf) written after
every append, accepted only if it matches the newest signed checkpoint (root and size),
the last record line (leaf hash) and the file offsets. A compact range with a given root
cannot be forged, so a tampered cache only ever falls back to the slow path. Slow path:
re-read and re-hash everything, and refuse to go on over a log that does not match its
newest checkpoint. Either way the writer never signs over records it cannot vouch for.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import AuditError
from .checkpoint import SignedCheckpoint, parse_signed_checkpoint, split_sidecar
from .interface import AuditLimits, FormatError
from .keys import Signer
from .merkle import CompactRange, hash_leaf
from .note import SignatureMismatch, verified_keys
from .storage import AppendFile


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


def save_state(path: Path, head: Head) -> None:
    """Best effort, atomic (rename), not fsynced: a lost or stale cache is only slower."""
    state = {"v": 1, "size": head.tree.size, "origin": head.origin,
             "stack": [[n, h.hex()] for n, h in head.tree.stack],
             "last_leaf": head.last_leaf.hex() if head.last_leaf else None,
             "last_len": head.last_len, "log_end": head.log_end, "cp_last": head.cp_last,
             "cp_end": head.cp_end}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _checkpoint(text: str | None, signer: Signer, limits: AuditLimits,
                where: str) -> SignedCheckpoint:
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


def head_from_state(state_path: Path, log: AppendFile, cps: AppendFile, signer: Signer,
                    limits: AuditLimits) -> Head | None:
    """The head from the cache, or None when the cache is missing, stale or wrong."""
    try:
        s = json.loads(state_path.read_text())
        tree = CompactRange([(int(n), bytes.fromhex(h)) for n, h in s["stack"]])
        last_leaf = bytes.fromhex(s["last_leaf"]) if s["last_leaf"] else None
        head = Head(tree, last_leaf, int(s["last_len"]), s["origin"], int(s["log_end"]),
                    int(s["cp_last"]), int(s["cp_end"]))
        if s.get("v") != 1 or tree.size != s["size"] or head.origin is None:
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    cp_size, log_size = os.fstat(cps.fd).st_size, os.fstat(log.fd).st_size
    if not (0 <= head.cp_last < head.cp_end <= cp_size <= head.cp_end + limits.max_note_bytes
            and 0 < head.last_len < head.log_end <= log_size):
        return None
    newest = split_sidecar(os.pread(cps.fd, head.cp_end - head.cp_last, head.cp_last), limits)
    after = split_sidecar(os.pread(cps.fd, cp_size - head.cp_end, head.cp_end), limits)
    if len(newest.entries) != 1 or newest.torn_bytes or after.entries:
        return None
    try:
        sc = _checkpoint(newest.entries[0].text, signer, limits, str(log.path))
    except AuditError:
        return None  # let the slow path look at it (and refuse with the full story)
    cp = sc.checkpoint
    if (cp.size, cp.root, cp.origin) != (tree.size, tree.root(), head.origin):
        return None
    start = head.log_end - head.last_len - 1
    chunk = os.pread(log.fd, head.last_len + 2, start - 1) if start else \
        b"\n" + os.pread(log.fd, head.last_len + 1, 0)
    if chunk[:1] != b"\n" or chunk[-1:] != b"\n" or hash_leaf(chunk[1:-1]) != last_leaf:
        return None
    return head


def head_from_files(log: AppendFile, cps: AppendFile, signer: Signer, limits: AuditLimits,
                    cps_existed: bool) -> Head:
    """Re-read and re-hash the whole log; refuse when it does not match its checkpoint."""
    where = str(log.path)
    side = split_sidecar(cps.read_all(limits.max_checkpoints_bytes), limits)
    committed, origin, root, cp_last = 0, None, None, 0
    if side.entries:
        sc = _checkpoint(side.entries[-1].text, signer, limits, where)
        committed, root, origin = sc.checkpoint.size, sc.checkpoint.root, sc.checkpoint.origin
        cp_last = side.entries[-1].offset
    data = log.read_all(limits.max_log_bytes)
    if data and not cps_existed:
        raise AuditError(f"{where}: has records but no {cps.path.name}; refusing to append "
                         "to a log without signatures")
    lines = data.split(b"\n")[:-1]
    if len(lines) < committed:
        raise AuditError(f"{where}: {len(lines)} complete records but the newest checkpoint "
                         f"signs {committed}: records were removed; refusing to append "
                         "(run `audit verify`)")
    tree = CompactRange()
    for line in lines[:committed]:
        tree.append(hash_leaf(line))
    if root is not None and tree.root() != root:
        raise AuditError(f"{where}: records do not match the newest signed checkpoint; "
                         "refusing to sign over them (run `audit verify`)")
    last = lines[committed - 1] if committed else None
    return Head(tree, hash_leaf(last) if last is not None else None,
                len(last) if last is not None else 0, origin,
                sum(len(line) + 1 for line in lines[:committed]), cp_last, side.complete_bytes)
