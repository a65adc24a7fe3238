"""Pure helpers for the verifier: name the kind and position of tampering.

Detection never depends on these heuristics - any change to signed bytes already fails a
root comparison. They only make the report say *what* happened and *where*.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .interface import Finding, TamperKind
from .merkle import CompactRange
from .records import GENESIS_PREV, leaf_tag

Record = dict[str, Any]

PRIORITY = {
    TamperKind.DELETED: 0, TamperKind.INSERTED: 0, TamperKind.REORDERED: 0,
    TamperKind.TRUNCATED: 1, TamperKind.ROLLBACK: 1, TamperKind.FORK: 1,
    TamperKind.EDITED: 2, TamperKind.BROKEN_CHAIN: 3, TamperKind.INCONSISTENT_RECORD: 4,
    TamperKind.UNSIGNED_RECORDS: 5, TamperKind.BAD_SIGNATURE: 6,
    TamperKind.MALFORMED_CHECKPOINT: 6, TamperKind.UNTRUSTED_CHECKPOINT: 7,
    TamperKind.ORIGIN_MISMATCH: 7,
}


def span(first: int, last: int) -> str:
    return f"record {first}" if first == last else f"records {first}-{last}"


def order(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """Earliest record first; at one record, the most specific kind first; no duplicates."""
    seen: set[tuple[TamperKind, int | None]] = set()
    out = []
    for f in sorted(findings, key=lambda f: (f.record if f.record is not None else 1 << 64,
                                             PRIORITY[f.kind])):
        if (f.kind, f.record) not in seen:
            seen.add((f.kind, f.record))
            out.append(f)
    return tuple(out)


def roots_at(leaves: Sequence[bytes], sizes: set[int]) -> dict[int, bytes]:
    """Root hash of each prefix size in ``sizes`` (sizes beyond the leaves are skipped)."""
    rng, out = CompactRange(), {}
    if 0 in sizes:
        out[0] = rng.root()
    for leaf in leaves:
        rng.append(leaf)
        if rng.size in sizes:
            out[rng.size] = rng.root()
    return out


def structural_finding(records: Sequence[Record | None],
                       leaves: Sequence[bytes]) -> Finding | None:
    """The first break of the ``index`` sequence or ``prev`` chain, classified."""
    pos_of: dict[str, int] = {}
    for i, h in enumerate(leaves):
        pos_of.setdefault(leaf_tag(h), i)  # a duplicated record links to its first copy

    def index(p: int) -> int | None:
        r = records[p]
        return r["index"] if r is not None else None

    def prev_pos(p: int) -> int | None:
        r = records[p]
        if r is None:
            return None
        return -1 if r["prev"] == GENESIS_PREV else pos_of.get(r["prev"])

    n = len(records)
    for p in range(n):
        if records[p] is None or (index(p) == p and prev_pos(p) == p - 1):
            continue
        return _classify(p, n, index, prev_pos)
    return None


def _classify(p: int, n: int, index: Any, prev_pos: Any) -> Finding:
    d, q = index(p), prev_pos(p)
    known = [index(i) for i in range(n)]
    if None not in known and known != list(range(n)) and sorted(known) == list(range(n)):
        return Finding(TamperKind.REORDERED, p,
                       f"the record at position {p} is record {d}: records were reordered")
    for x in (p - 1, p):  # the record after x carries on the chain from before x
        if 0 <= x and x + 1 < n and index(x + 1) == x and prev_pos(x + 1) == x - 1:
            return Finding(TamperKind.INSERTED, x,
                           f"record {x} is not part of the signed chain: the next record "
                           f"links to record {x - 1}, so this one was inserted")
    # Record p is genuine (unchanged) when the record after it links to it.
    genuine = p + 1 < n and prev_pos(p + 1) == p
    if d != p and not genuine:
        return Finding(TamperKind.EDITED, p,
                       f"record {p} was changed: it claims index {d} and the next record "
                       "does not link to it")
    if d > p:
        return Finding(TamperKind.DELETED, p,
                       f"the record at position {p} says it is record {d}: "
                       f"{d - p} record(s) before it were deleted")
    if d < p:
        return Finding(TamperKind.INSERTED, p,
                       f"the record at position {p} says it is record {d}: an extra copy "
                       "or forged record was inserted")
    if q is None and genuine:
        if p == 0:
            return Finding(TamperKind.EDITED, 0, "record 0's prev is not the genesis value")
        return Finding(TamperKind.EDITED, p - 1,
                       f"record {p}'s prev hash does not match record {p - 1}: "
                       f"record {p - 1} was changed")
    return Finding(TamperKind.BROKEN_CHAIN, p,
                   f"record {p}'s prev does not name record {p - 1}")
