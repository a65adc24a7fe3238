"""Self-contained proof bundles (JSON) a third party checks with only a public key.

Inclusion bundle: the record as stored, its leaf hash, the RFC 9162 audit path and the
signed checkpoint whose root it leads to. Consistency bundle: two tree sizes and roots
and the RFC 9162 consistency proof between them.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError, VerificationError
from . import storage
from .checkpoint import SignedCheckpoint, parse_signed_checkpoint
from .interface import DEFAULT_LIMITS, AuditLimits, FormatError
from .keys import PublicKey
from .log import read_log
from .merkle import (
    consistency_proof,
    hash_leaf,
    inclusion_proof,
    root_hash,
    verify_consistency,
    verify_inclusion,
)
from .verify import load_trusted_checkpoint

INCLUSION_FORMAT = "https://sandboxharness.dev/audit/inclusion-proof/v1"
CONSISTENCY_FORMAT = "https://sandboxharness.dev/audit/consistency-proof/v1"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def prove_inclusion(log_path: Path, index: int, *, size: int | None = None,
                    limits: AuditLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Inclusion proof of record ``index`` against the newest checkpoint (or the one of
    ``size``). The proof is checked against that checkpoint's root before it is returned."""
    lines, checkpoints = read_log(log_path, limits)
    if not 0 <= index < len(lines):
        raise InputError(f"no record {index}: the log has {len(lines)} records",
                         where=str(log_path))
    fits = [c for c in checkpoints if c.checkpoint.size > index
            and (size is None or c.checkpoint.size == size)]
    if not fits:
        raise InputError(f"no checkpoint {'of size ' + str(size) if size else 'covers'} "
                         f"record {index}", where=str(log_path))
    sc = max(fits, key=lambda c: c.checkpoint.size)
    tree_size = sc.checkpoint.size
    if tree_size > len(lines):
        raise VerificationError(f"{log_path}: checkpoint size {tree_size} is beyond the "
                                f"{len(lines)} records in the log (run `audit verify`)")
    leaves = [hash_leaf(line) for line in lines[:tree_size]]
    proof = inclusion_proof(leaves, index, tree_size)
    verify_inclusion(leaves[index], index, tree_size, proof, sc.checkpoint.root)
    return {"format": INCLUSION_FORMAT, "origin": sc.checkpoint.origin, "index": index,
            "tree_size": tree_size, "record": lines[index].decode(),
            "leaf_hash": _b64(leaves[index]), "proof": [_b64(p) for p in proof],
            "checkpoint": sc.text}


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
    lines, _ = read_log(log_path, limits)
    if c2.size > len(lines):
        raise VerificationError(f"{log_path}: has {len(lines)} records, fewer than the new "
                                f"checkpoint's {c2.size}")
    leaves = [hash_leaf(line) for line in lines[:c2.size]]
    for c, which in ((c1, "old"), (c2, "new")):
        if root_hash(leaves[:c.size]) != c.root:
            raise VerificationError(f"the log's tree of size {c.size} does not have the {which} "
                                    "checkpoint's root: log and checkpoint disagree")
    proof = consistency_proof(leaves, c1.size, c2.size) if c1.size else []
    if c1.size:
        verify_consistency(c1.size, c2.size, proof, c1.root, c2.root)
    return {"format": CONSISTENCY_FORMAT, "origin": c1.origin, "old_size": c1.size,
            "new_size": c2.size, "old_root": _b64(c1.root), "new_root": _b64(c2.root),
            "proof": [_b64(p) for p in proof], "signatures_checked": bool(public_keys)}
