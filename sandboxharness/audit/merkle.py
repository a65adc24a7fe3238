"""RFC 6962 / RFC 9162 Merkle tree hashing and proofs. Pure functions, no I/O.

Leaves are passed as *leaf hashes* (``hash_leaf(record_bytes)``). Proof generation
follows RFC 9162 section 2.1.3.1 / 2.1.4.1, verification section 2.1.3.2 / 2.1.4.2.
Verification raises :class:`~sandboxharness.errors.VerificationError`; the
``root_from_*`` helpers return the computed root instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from ..errors import VerificationError

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
"""MTH of the empty tree: SHA-256 of the empty string."""


class ProofError(VerificationError):
    """An inclusion or consistency proof does not verify."""


def hash_leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def hash_children(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """Largest power of two strictly smaller than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


class CompactRange:
    """Incremental tree: the perfect subtrees of the leaves seen so far (O(log n) state).

    ``root()`` equals the RFC 6962 MTH of every prefix, so a verifier gets the root at
    each checkpoint size in one pass.
    """

    def __init__(self, stack: Sequence[tuple[int, bytes]] = ()) -> None:
        sizes = [n for n, _ in stack]
        if any(n & (n - 1) or n <= 0 for n in sizes) or sizes != sorted(set(sizes), reverse=True) \
                or any(len(h) != HASH_SIZE for _, h in stack):
            raise ValueError("not a compact range: sizes must be distinct decreasing powers of 2")
        self._stack: list[tuple[int, bytes]] = list(stack)
        self.size = sum(sizes)

    @property
    def stack(self) -> tuple[tuple[int, bytes], ...]:
        """(subtree size, hash) of each perfect subtree, left to right."""
        return tuple(self._stack)

    def copy(self) -> CompactRange:
        return CompactRange(self._stack)

    def append(self, leaf_hash: bytes) -> None:
        node = (1, leaf_hash)
        while self._stack and self._stack[-1][0] == node[0]:
            left = self._stack.pop()
            node = (left[0] * 2, hash_children(left[1], node[1]))
        self._stack.append(node)
        self.size += 1

    def root(self) -> bytes:
        if not self._stack:
            return EMPTY_ROOT
        acc = self._stack[-1][1]
        for _, h in reversed(self._stack[:-1]):
            acc = hash_children(h, acc)
        return acc


def root_hash(leaves: Sequence[bytes]) -> bytes:
    """MTH(D[n]) over leaf hashes."""
    rng = CompactRange()
    for leaf in leaves:
        rng.append(leaf)
    return rng.root()


def _mth(leaves: Sequence[bytes], lo: int, hi: int) -> bytes:
    n = hi - lo
    if n == 1:
        return leaves[lo]
    k = _split(n)
    return hash_children(_mth(leaves, lo, lo + k), _mth(leaves, lo + k, hi))


def _path(leaves: Sequence[bytes], m: int, lo: int, hi: int, out: list[bytes]) -> None:
    n = hi - lo
    if n == 1:
        return
    k = _split(n)
    if m < k:
        _path(leaves, m, lo, lo + k, out)
        out.append(_mth(leaves, lo + k, hi))
    else:
        _path(leaves, m - k, lo + k, hi, out)
        out.append(_mth(leaves, lo, lo + k))


def inclusion_proof(leaves: Sequence[bytes], index: int, size: int | None = None) -> list[bytes]:
    """PATH(index, D[0:size]) - the audit path for one leaf, bottom up."""
    size = len(leaves) if size is None else size
    if not 0 <= index < size <= len(leaves):
        raise ValueError(f"need 0 <= index < size <= {len(leaves)}, got {index}, {size}")
    out: list[bytes] = []
    _path(leaves, index, 0, size, out)
    return out


def _subproof(leaves: Sequence[bytes], m: int, lo: int, hi: int, *, whole: bool,
              out: list[bytes]) -> None:
    n = hi - lo
    if m == n:
        if not whole:
            out.append(_mth(leaves, lo, hi))
        return
    k = _split(n)
    if m <= k:
        _subproof(leaves, m, lo, lo + k, whole=whole, out=out)
        out.append(_mth(leaves, lo + k, hi))
    else:
        _subproof(leaves, m - k, lo + k, hi, whole=False, out=out)
        out.append(_mth(leaves, lo, lo + k))


def consistency_proof(leaves: Sequence[bytes], old_size: int,
                      new_size: int | None = None) -> list[bytes]:
    """PROOF(old_size, D[0:new_size]); empty when the sizes are equal."""
    new_size = len(leaves) if new_size is None else new_size
    if not 0 < old_size <= new_size <= len(leaves):
        raise ValueError(f"need 0 < old <= new <= {len(leaves)}, got {old_size}, {new_size}")
    out: list[bytes] = []
    if old_size < new_size:
        _subproof(leaves, old_size, 0, new_size, whole=True, out=out)
    return out


def _subproof_ranges(m: int, lo: int, hi: int, whole: bool, out: list[tuple[int, int]]) -> None:
    n = hi - lo
    if m == n:
        if not whole:
            out.append((lo, hi))
        return
    k = _split(n)
    if m <= k:
        _subproof_ranges(m, lo, lo + k, whole, out)
        out.append((lo + k, hi))
    else:
        _subproof_ranges(m - k, lo + k, hi, False, out)
        out.append((lo, lo + k))


def consistency_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """The leaf ranges whose MTH make up PROOF(old_size, new_size), in proof order."""
    if not 0 < old_size <= new_size:
        raise ValueError(f"need 0 < old <= new, got {old_size}, {new_size}")
    out: list[tuple[int, int]] = []
    if old_size < new_size:
        _subproof_ranges(old_size, 0, new_size, True, out)
    return out


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The leaf ranges whose MTH make up PATH(index, size), in proof order."""
    if not 0 <= index < size:
        raise ValueError(f"need 0 <= index < size, got {index}, {size}")
    out: list[tuple[int, int]] = []
    lo, hi, m = 0, size, index
    stack: list[tuple[int, int]] = []
    while hi - lo > 1:
        k = _split(hi - lo)
        if m < k:
            stack.append((lo + k, hi))
            hi = lo + k
        else:
            stack.append((lo, lo + k))
            lo, m = lo + k, m - k
    out.extend(reversed(stack))
    return out


def range_hashes(leaves: Iterable[bytes], ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """MTH of each (disjoint) leaf range, from one pass over the leaf hashes: memory is
    O(log n) per range, never the leaves."""
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    out: list[bytes] = [b""] * len(ranges)
    pos, k, rng = 0, 0, CompactRange()
    end = max((hi for _, hi in ranges), default=0)
    for leaf in leaves:
        if pos >= end:
            break
        while k < len(order) and ranges[order[k]][1] <= pos:
            k += 1
        if k < len(order) and ranges[order[k]][0] <= pos:
            rng.append(leaf)
            if pos + 1 == ranges[order[k]][1]:
                out[order[k]] = rng.root()
                rng = CompactRange()
        pos += 1
    if pos < end:
        raise ValueError(f"only {pos} leaves, the proof needs {end}")
    return out


def _check_hashes(proof: Sequence[bytes], what: str) -> None:
    for i, h in enumerate(proof):
        if len(h) != HASH_SIZE:
            raise ProofError(f"{what} element {i} is {len(h)} bytes, not {HASH_SIZE}")


def root_from_inclusion_proof(leaf_hash: bytes, index: int, size: int,
                              proof: Sequence[bytes]) -> bytes:
    """RFC 9162 2.1.3.2, returning the root the proof leads to."""
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is outside a tree of size {size}")
    if len(leaf_hash) != HASH_SIZE:
        raise ProofError(f"leaf hash is {len(leaf_hash)} bytes, not {HASH_SIZE}")
    _check_hashes(proof, "inclusion proof")
    fn, sn, r = index, size - 1, leaf_hash
    for p in proof:
        if sn == 0:
            raise ProofError("inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = hash_children(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = hash_children(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("inclusion proof is too short")
    return r


def verify_inclusion(leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes],
                     root: bytes) -> None:
    if root_from_inclusion_proof(leaf_hash, index, size, proof) != root:
        raise ProofError(f"inclusion proof for leaf {index} does not lead to the root of "
                         f"the tree of size {size}")


def verify_consistency(old_size: int, new_size: int, proof: Sequence[bytes],  # noqa: C901 - RFC 9162's steps, one by one
                       old_root: bytes, new_root: bytes) -> None:
    """RFC 9162 2.1.4.2 plus the trivial cases (equal sizes, empty trees)."""
    if old_size < 0 or old_size > new_size:
        raise ProofError(f"old size {old_size} is larger than new size {new_size}")
    if old_size == new_size:
        if proof:
            raise ProofError("sizes are equal but the consistency proof is not empty")
        if old_size == 0 and (old_root != EMPTY_ROOT or new_root != EMPTY_ROOT):
            raise ProofError("an empty tree must have the empty-tree root")
        if old_root != new_root:
            raise ProofError(f"two different roots for the same size {old_size}")
        return
    if old_size == 0:
        raise ProofError("a consistency proof from the empty tree proves nothing")
    if not proof:
        raise ProofError("consistency proof is empty")
    if len(old_root) != HASH_SIZE or len(new_root) != HASH_SIZE:
        raise ProofError("roots must be 32-byte hashes")
    _check_hashes(proof, "consistency proof")
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("consistency proof is too long")
        if fn & 1 or fn == sn:
            fr = hash_children(c, fr)
            sr = hash_children(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = hash_children(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("consistency proof is too short")
    if fr != old_root:
        raise ProofError(f"consistency proof does not reproduce the old root (size {old_size})")
    if sr != new_root:
        raise ProofError(f"consistency proof does not reproduce the new root (size {new_size})")
