"""Self-contained proof bundles (JSON) a third party checks with only a public key.

Inclusion bundle: the record as stored, its leaf hash, the RFC 9162 audit path and the
signed checkpoint whose root it leads to. Consistency bundle: two tree sizes and roots
and the RFC 9162 consistency proof between them.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import InputError, VerificationError
from . import storage
from .checkpoint import SignedCheckpoint, parse_signed_checkpoint
from .interface import DEFAULT_LIMITS, AuditLimits, FormatError
from .keys import PublicKey
from .merkle import (
    CompactRange,
    consistency_ranges,
    hash_leaf,
    inclusion_ranges,
    range_hashes,
    verify_consistency,
    verify_inclusion,
)
from .verify import load_trusted_checkpoint

INCLUSION_FORMAT = "https://sandboxharness.dev/audit/inclusion-proof/v1"
CONSISTENCY_FORMAT = "https://sandboxharness.dev/audit/consistency-proof/v1"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@contextmanager
def _locked_log(log_path: Path) -> Iterator[int]:
    fd = storage.open_input(log_path, what="audit log")
    try:
        storage.flock(fd, fcntl.LOCK_SH, log_path)
        yield fd
    finally:
        os.close(fd)


def _lines(fd: int, where: Path) -> Iterator[bytes]:
    pending = b""
    for chunk in storage.iter_chunks(fd, os.fstat(fd).st_size, where):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        yield from lines


def _count(fd: int, where: Path) -> int:
    return sum(c.count(b"\n") for c in storage.iter_chunks(fd, os.fstat(fd).st_size, where))


def prove_inclusion(log_path: Path, index: int, *, size: int | None = None,
                    limits: AuditLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Inclusion proof of record ``index`` against the newest checkpoint (or the one of
    ``size``). The proof is checked against that checkpoint's root before it is returned.
    The log is streamed: memory does not grow with it."""
    with _locked_log(log_path) as fd:
        n = _count(fd, log_path)
        if not 0 <= index < n:
            raise InputError(f"no record {index}: the log has {n} records", where=str(log_path))
        sc = None
        for c in checkpoints_of(log_path, limits):
            if c.checkpoint.size > index and (size is None or c.checkpoint.size == size) and \
                    (sc is None or c.checkpoint.size > sc.checkpoint.size):
                sc = c
        if sc is None:
            raise InputError(f"no checkpoint {'of size ' + str(size) if size else 'covers'} "
                             f"record {index}", where=str(log_path))
        tree_size = sc.checkpoint.size
        if tree_size > n:
            raise VerificationError(f"{log_path}: checkpoint size {tree_size} is beyond the "
                                    f"{n} records in the log (run `audit verify`)")
        record: list[bytes] = []

        def leaves() -> Iterator[bytes]:
            for i, line in enumerate(_lines(fd, log_path)):
                if i == index:
                    record.append(line)
                yield hash_leaf(line)

        ranges = inclusion_ranges(index, tree_size)
        proof = range_hashes(leaves(), [*ranges, (index, index + 1)])
    leaf = proof.pop()
    verify_inclusion(leaf, index, tree_size, proof, sc.checkpoint.root)
    return {"format": INCLUSION_FORMAT, "origin": sc.checkpoint.origin, "index": index,
            "tree_size": tree_size, "record": record[0].decode(),
            "leaf_hash": _b64(leaf), "proof": [_b64(p) for p in proof],
            "checkpoint": sc.text}


def checkpoints_of(log_path: Path, limits: AuditLimits) -> Iterator[SignedCheckpoint]:
    """The parseable (unverified) checkpoints of a log, streamed."""
    from .witnessed import checkpoint_entries

    for _, text in checkpoint_entries(log_path.with_name(log_path.name + ".checkpoints"),
                                      limits):
        try:
            if text is not None:
                yield parse_signed_checkpoint(text, limits)
        except FormatError:
            continue


def _hashes(value: Any, what: str) -> list[bytes]:
    if not isinstance(value, list) or len(value) > 128:
        raise VerificationError(f"{what} must be a list of at most 128 hashes")
    try:
        return [base64.b64decode(v, validate=True) for v in value]
    except (binascii.Error, TypeError, ValueError):
        raise VerificationError(f"{what} holds something that is not base64") from None


def verify_inclusion_bundle(bundle: Any, public_keys: Sequence[PublicKey],
                            limits: AuditLimits = DEFAULT_LIMITS) -> SignedCheckpoint:
    """Check an inclusion bundle: signature, leaf hash of the record, path to the root."""
    if not isinstance(bundle, dict) or bundle.get("format") != INCLUSION_FORMAT:
        raise VerificationError("not an inclusion proof bundle")
    index, size, record = bundle.get("index"), bundle.get("tree_size"), bundle.get("record")
    if type(index) is not int or type(size) is not int or not isinstance(record, str) \
            or not isinstance(bundle.get("checkpoint"), str):
        raise VerificationError("inclusion bundle fields have the wrong types")
    try:
        sc = load_trusted_checkpoint(bundle["checkpoint"], public_keys, limits)
    except InputError as exc:
        raise VerificationError(f"bundle checkpoint: {exc}") from None
    if sc.checkpoint.size != size:
        raise VerificationError("bundle tree_size differs from its checkpoint")
    leaf = hash_leaf(record.encode())
    if _hashes([bundle.get("leaf_hash")], "leaf_hash") != [leaf]:
        raise VerificationError("leaf_hash is not the hash of the record")
    verify_inclusion(leaf, index, size, _hashes(bundle.get("proof"), "proof"),
                     sc.checkpoint.root)
    return sc


def _load(source: Path, keys: Sequence[PublicKey] | None,
          limits: AuditLimits) -> SignedCheckpoint:
    if keys:
        return load_trusted_checkpoint(source, keys, limits)
    text = storage.read_text_file(source, limits.max_note_bytes, what="checkpoint")
    try:
        return parse_signed_checkpoint(text, limits)
    except FormatError as exc:
        raise InputError(f"not a signed checkpoint: {exc}", where=str(source)) from None


def prove_consistency(log_path: Path, old: Path, new: Path,
                      public_keys: Sequence[PublicKey] | None = None, *,
                      limits: AuditLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Consistency proof between two checkpoint files, built from the log and verified
    against both roots (signatures too, when ``public_keys`` are given)."""
    c1, c2 = (_load(p, public_keys, limits).checkpoint for p in (old, new))
    if c1.origin != c2.origin:
        raise VerificationError(f"the checkpoints are for different logs: {c1.origin} vs "
                                f"{c2.origin}")
    if c1.size > c2.size:
        raise InputError(f"--old has size {c1.size}, larger than --new ({c2.size})")
    with _locked_log(log_path) as fd:
        roots: dict[int, bytes] = {}
        rng = CompactRange()
        for line in _lines(fd, log_path):
            if rng.size >= c2.size:
                break
            rng.append(hash_leaf(line))
            if rng.size in (c1.size, c2.size):
                roots[rng.size] = rng.root()
        if rng.size < c2.size:
            raise VerificationError(f"{log_path}: has {rng.size} records, fewer than the new "
                                    f"checkpoint's {c2.size}")
        for c, which in ((c1, "old"), (c2, "new")):
            if c.size and roots.get(c.size) != c.root:
                raise VerificationError(f"the log's tree of size {c.size} does not have the "
                                        f"{which} checkpoint's root: log and checkpoint disagree")
        proof = (range_hashes((hash_leaf(x) for x in _lines(fd, log_path)),
                              consistency_ranges(c1.size, c2.size)) if c1.size else [])
    if c1.size:
        verify_consistency(c1.size, c2.size, proof, c1.root, c2.root)
    return {"format": CONSISTENCY_FORMAT, "origin": c1.origin, "old_size": c1.size,
            "new_size": c2.size, "old_root": _b64(c1.root), "new_root": _b64(c2.root),
            "proof": [_b64(p) for p in proof], "signatures_checked": bool(public_keys)}
