"""One streaming pass over the log: leaf hashes, the Merkle tree (a compact range, never
the leaves), every signed root compared as the pass reaches its size, and the
``index``/``prev`` chain. Memory: a few chunks, a window of records around the first
chain break, and per-size data only for the sizes named in advance (out-of-order and
trusted checkpoints).

Per-record content checks (:mod:`.content`) are handed off chunk by chunk - to worker
processes when there are any - and come back, in order, with each record's ``index``
and ``prev`` for the chain.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .analysis import GENESIS, Link, Window, classify
from .content import CHAIN, NO_INDEX
from .interface import TamperFinding, TamperKind
from .merkle import EMPTY_ROOT, CompactRange

WINDOW = 1024
"""Records kept on each side of the first chain break to classify it."""
MAX_FINDINGS = 1000
_IN_FLIGHT = 6

Job = Callable[[], Any]
Submit = Callable[[tuple[int, int] | None, Callable[[], bytes], int, frozenset[int]], Job]
"""submit(file region of the lines or None, the lines joined, first record, oversized)."""
_UNPACK = CHAIN.iter_unpack


@dataclass
class Roots:
    """The signed roots met in order, as compared with the log's."""

    last_match: int = 0
    """Largest size (before the first problem) whose signed root matched the log's."""
    first_bad: tuple[int, str, int] | None = None
    """(size, label, last match below it) of the first signed root the log contradicts."""
    conflict: tuple[int, str, int] | None = None
    """(size, labels, last match below it): two signed roots for one size."""
    captured: dict[int, bytes] = field(default_factory=dict)
    """The log's root at each size named in advance."""
    in_order_at: dict[int, set[bytes]] = field(default_factory=dict)
    match_below: dict[int, int] = field(default_factory=dict)


class LogScan:
    def __init__(self, checkpoints: Iterator[tuple[int, bytes, str]], special: set[int],
                 max_record: int, submit: Submit) -> None:
        self.tree = CompactRange()
        self.n = 0
        self.cps, self.special, self.roots = checkpoints, special, Roots()
        self.next_cp: tuple[int, bytes, str] | None = None
        self.prev_size, self.prev_root, self.prev_label = -1, b"", ""
        self._advance()
        self.max_record, self.submit = max_record, submit
        self.pending = bytearray()
        self.pending_len = 0
        self.offset = 0  # file offset where the next chunk starts
        self.hashing: Any = None  # an oversized line being hashed
        self.jobs: deque[tuple[Job, list[bytes], int]] = deque()
        self.findings: list[TamperFinding] = []
        self.more = 0
        self.drift: list[str] = []
        # the chain, checked as content results come back (in order)
        self.last_leaf = GENESIS
        self.recent: deque[tuple[int | None, bytes | None, bytes]] = deque(maxlen=WINDOW)
        self.after: list[tuple[int | None, bytes | None, bytes]] = []
        self.break_at: int | None = None
        self.structural: TamperFinding | None = None

    # -- bytes -> lines --------------------------------------------------------------
    def feed(self, chunk: bytes) -> None:
        parts = chunk.split(b"\n")
        tail = parts.pop()  # what follows the last newline: the start of the next line
        region_start = self.offset - self.pending_len
        self.offset += len(chunk)
        if parts:
            first, leaf, length = self._close(parts[0])
            lines, big = [first, *parts[1:]], {}
            if leaf is not None:
                big[0] = leaf
                self._oversized(self.n, length)
            for i in range(1, len(lines)):
                if len(lines[i]) > self.max_record:
                    big[i] = hashlib.sha256(b"\x00" + lines[i]).digest()
                    self._oversized(self.n + i, len(lines[i]))
                    lines[i] = b""
            start = self.n
            region = None if big else (region_start, self.offset - len(tail) - region_start)
            job = self.submit(region, lambda: b"\n".join(lines), start,
                              frozenset(start + i for i in big))
            self.jobs.append((job, self._hash(lines, big), start))
            while len(self.jobs) > _IN_FLIGHT:
                self._merge(*self.jobs.popleft())
        self._open(tail)

    def _close(self, piece: bytes) -> tuple[bytes, bytes | None, int]:
        """The line that ends with ``piece``, or (b"", its leaf hash, length) if oversized."""
        length = self.pending_len + len(piece)
        if self.hashing is None and length <= self.max_record:
            line = bytes(self.pending) + piece if self.pending_len else piece
            self.pending.clear()
            self.pending_len = 0
            return line, None, length
        h = self.hashing or hashlib.sha256(b"\x00" + bytes(self.pending))
        h.update(piece)
        self.pending.clear()
        self.pending_len, self.hashing = 0, None
        return b"", h.digest(), length

    def _open(self, piece: bytes) -> None:
        """Bytes of a line whose end is not in yet (kept only up to the record limit)."""
        if self.hashing is None and self.pending_len + len(piece) > self.max_record:
            self.hashing = hashlib.sha256(b"\x00" + bytes(self.pending))
            self.pending.clear()
        if self.hashing is not None:
            self.hashing.update(piece)
        else:
            self.pending += piece
        self.pending_len += len(piece)

    def _oversized(self, p: int, length: int) -> None:
        self.add(TamperFinding(TamperKind.EDITED, p, f"record {p} is {length} bytes, over the "
                         f"{self.max_record}-byte record limit"))

    def partial(self) -> tuple[bytes, int]:
        """The incomplete last line (its first bytes, capped) and its length."""
        return bytes(self.pending), self.pending_len

    def finish(self) -> None:
        while self.jobs:
            self._merge(*self.jobs.popleft())
        if self.break_at is not None and self.structural is None:
            self._classify()

    def add(self, finding: TamperFinding) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(finding)
        else:
            self.more += 1

    # -- the hot loop: hash, grow the tree, compare signed roots -----------------------
    def _hash(self, lines: list[bytes], big: dict[int, bytes]) -> list[bytes]:
        sha, append, special = hashlib.sha256, self.tree.append, self.special
        n = self.n
        next_size = self.next_cp[0] if self.next_cp is not None else -1
        leaves = []
        for i, line in enumerate(lines):
            leaf = big[i] if big and i in big else sha(b"\x00" + line).digest()
            leaves.append(leaf)
            append(leaf)
            n += 1
            if n == next_size or n in special:
                self.n = n
                self._at_size(n)
                next_size = self.next_cp[0] if self.next_cp is not None else -1
        self.n = n
        return leaves

    def _at_size(self, size: int) -> None:
        r = self.roots
        root = self.tree.root()
        if size in self.special:
            r.captured[size] = root
            r.match_below[size] = r.last_match
        while self.next_cp is not None and self.next_cp[0] <= size:
            cp_size, cp_root, cp_label = self.next_cp
            self._advance()
            if cp_size in self.special:
                r.in_order_at.setdefault(cp_size, set()).add(cp_root)
            if cp_size == self.prev_size and cp_root != self.prev_root and r.conflict is None:
                r.conflict = (cp_size, f"{self.prev_label} & {cp_label}", r.last_match)
            self.prev_size, self.prev_root, self.prev_label = cp_size, cp_root, cp_label
            if cp_root != root:
                if r.first_bad is None:
                    r.first_bad = (cp_size, cp_label, r.last_match)
            elif r.first_bad is None and r.conflict is None:
                r.last_match = cp_size

    def _advance(self) -> None:
        """The next in-order checkpoint; one for the empty tree is judged on the spot."""
        self.next_cp = next(self.cps, None)
        while self.next_cp is not None and self.next_cp[0] == 0:
            if self.next_cp[1] != EMPTY_ROOT and self.roots.first_bad is None:
                self.roots.first_bad = (0, self.next_cp[2], 0)
            self.next_cp = next(self.cps, None)

    # -- content results and the chain -------------------------------------------------
    def _merge(self, job: Job, leaves: list[bytes], first: int) -> None:
        problems, drift, chain = job()
        for p, kind, message in problems:
            self.add(TamperFinding(TamperKind(kind), p, message))
        self.drift += drift[:max(0, 3 - len(self.drift))]
        if self.structural is not None:
            return
        last, recent, after = self.last_leaf, self.recent, self.after
        for i, (index, prev) in enumerate(_UNPACK(chain)):
            leaf = leaves[i]
            if index == NO_INDEX:
                index = prev = None
            if self.break_at is None:
                if index is not None and (index != first + i or prev != last):
                    self.break_at = first + i
                    after.append((index, prev, leaf))
                else:
                    recent.append((index, prev, leaf))
            else:
                after.append((index, prev, leaf))
                if len(after) >= WINDOW:
                    self._classify()
                    return
            last = leaf
        self.last_leaf = last

    def _classify(self) -> None:
        if self.break_at is None:
            return
        links = [Link(*x) for x in (*self.recent, *self.after)]
        self.structural = classify(Window(self.break_at - len(self.recent), links),
                                   self.break_at)
        self.recent.clear()
        self.after = []
