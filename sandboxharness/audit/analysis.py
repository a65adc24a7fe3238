"""Pure helpers for the verifier: name the kind and position of tampering.

Detection never depends on these heuristics - any change to signed bytes already fails a
root comparison. They only make the report say *what* happened and *where*: the first
break of the ``index``/``prev`` chain is classified from a bounded window of records
around it, so memory does not grow with the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .interface import TamperFinding, TamperKind

GENESIS = bytes(32)
"""``prev`` of record 0 (64 zeros), as raw bytes."""

PRIORITY = {
    TamperKind.DELETED: 0, TamperKind.INSERTED: 0, TamperKind.REORDERED: 0,
    TamperKind.TRUNCATED: 1, TamperKind.ROLLBACK: 1, TamperKind.FORK: 1,
    TamperKind.EDITED: 2, TamperKind.BROKEN_CHAIN: 3, TamperKind.INCONSISTENT_RECORD: 4,
    TamperKind.UNSIGNED_RECORDS: 5, TamperKind.BAD_SIGNATURE: 6,
    TamperKind.MALFORMED_CHECKPOINT: 6, TamperKind.UNTRUSTED_CHECKPOINT: 7,
    TamperKind.ORIGIN_MISMATCH: 7, TamperKind.UNWITNESSED: 8,
}


def span(first: int, last: int) -> str:
    return f"record {first}" if first == last else f"records {first}-{last}"


def order(findings: Sequence[TamperFinding]) -> tuple[TamperFinding, ...]:
    """Earliest record first; at one record, the most specific kind first; no duplicates."""
    seen: set[tuple[TamperKind, int | None]] = set()
    out = []
    for f in sorted(findings, key=lambda f: (f.record if f.record is not None else 1 << 64,
                                             PRIORITY[f.kind])):
        if (f.kind, f.record) not in seen:
            seen.add((f.kind, f.record))
            out.append(f)
    return tuple(out)


@dataclass(frozen=True)
class Link:
    """What the chain analysis keeps of one record."""

    index: int | None
    """None when the line is not a record."""
    prev: bytes | None
    leaf: bytes


class Window:
    """Records ``base .. base+len(links)-1`` of the log around the first chain break."""

    def __init__(self, base: int, links: Sequence[Link]) -> None:
        self.base, self.links, self.end = base, links, base + len(links)
        self.pos_of: dict[bytes, int] = {}
        for i, link in enumerate(links):
            self.pos_of.setdefault(link.leaf, base + i)  # a copy links to its first original

    def index(self, p: int) -> int | None:
        return self.links[p - self.base].index if self.base <= p < self.end else None

    def prev_pos(self, p: int) -> int | None:
        if not self.base <= p < self.end:
            return None
        prev = self.links[p - self.base].prev
        if prev is None:
            return None
        return -1 if prev == GENESIS else self.pos_of.get(prev)


def classify(w: Window, p: int) -> TamperFinding:
    """The first break, at record ``p``, of the chain."""
    index, prev_pos, n = w.index, w.prev_pos, w.end
    d, q = index(p), prev_pos(p)
    known = [index(i) for i in range(w.base, n)]
    expected = list(range(w.base, n))
    if None not in known and known != expected and sorted(known) == expected:  # type: ignore[type-var]
        return TamperFinding(TamperKind.REORDERED, p,
                       f"the record at position {p} is record {d}: records were reordered")
    for x in (p - 1, p):  # the record after x carries on the chain from before x
        if 0 <= x and x + 1 < n and index(x + 1) == x and prev_pos(x + 1) == x - 1:
            return TamperFinding(TamperKind.INSERTED, x,
                           f"record {x} is not part of the signed chain: the next record "
                           f"links to record {x - 1}, so this one was inserted")
    # Record p is genuine (unchanged) when the record after it links to it.
    genuine = p + 1 < n and prev_pos(p + 1) == p
    if d is not None and d != p and not genuine:
        return TamperFinding(TamperKind.EDITED, p,
                       f"record {p} was changed: it claims index {d} and the next record "
                       "does not link to it")
    if d is not None and d > p:
        return TamperFinding(TamperKind.DELETED, p,
                       f"the record at position {p} says it is record {d}: "
                       f"{d - p} record(s) before it were deleted")
    if d is not None and d < p:
        return TamperFinding(TamperKind.INSERTED, p,
                       f"the record at position {p} says it is record {d}: an extra copy "
                       "or forged record was inserted")
    if q is None and genuine:
        if p == 0:
            return TamperFinding(TamperKind.EDITED, 0, "record 0's prev is not the genesis value")
        return TamperFinding(TamperKind.EDITED, p - 1,
                       f"record {p}'s prev hash does not match record {p - 1}: "
                       f"record {p - 1} was changed")
    return TamperFinding(TamperKind.BROKEN_CHAIN, p,
                   f"record {p}'s prev does not name record {p - 1}")
