"""One streaming pass over the log: leaf hashes, the Merkle tree (a compact range, never
the leaves), the ``index``/``prev`` chain and every signed root compared as the pass
reaches its size. Memory: one chunk, a window of recent records, and per-size data only
for the few sizes named in advance (out-of-order and trusted checkpoints).

Per-record content checks (:mod:`.content`) are handed off chunk by chunk - to worker
processes when there are any - and their findings merged in record order.
"""

from __future__ import annotations

import hashlib
import re
from binascii import hexlify
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .analysis import GENESIS, Link, Window, classify
from .interface import Finding, TamperKind
from .merkle import EMPTY_ROOT, CompactRange

_CHAIN = re.compile(rb'"index":(0|[1-9][0-9]{0,15}),"policy_sha256":"(?:[^"\\]|\\.)*",'
                    rb'"prev":"sha256:([0-9a-f]{64})"')
WINDOW = 1024
"""Records kept on each side of the first chain break to classify it."""
MAX_FINDINGS = 1000


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


Submit = Callable[[bytes, int, frozenset[int]], Callable[[], tuple[list[object], list[str]]]]


class LogScan:
    def __init__(self, checkpoints: Iterator[tuple[int, bytes, str]], special: set[int],
                 max_record: int, submit: Submit) -> None:
        self.tree = CompactRange()
        self.n = 0
        self.last_leaf = GENESIS
        self.recent: deque[tuple[int | None, bytes | None, bytes]] = deque(maxlen=WINDOW)
        self.after: list[tuple[int | None, bytes | None, bytes]] = []
        self.break_at: int | None = None
        self.structural: Finding | None = None
        self.cps, self.special, self.roots = checkpoints, special, Roots()
        self.next_cp = None
        self.prev_size, self.prev_root, self.prev_label = -1, b"", ""
        self._advance()
        self.max_record, self.submit = max_record, submit
        self.pending = bytearray()
        self.pending_len = 0
        self.hashing: hashlib._Hash | None = None  # an oversized line being hashed
        self.jobs: deque[Callable[[], tuple[list[object], list[str]]]] = deque()
        self.findings: list[Finding] = []
        self.more = 0
        self.drift: list[str] = []

    # -- bytes -> lines --------------------------------------------------------------
    def feed(self, chunk: bytes) -> None:
        parts = chunk.split(b"\n")
        tail = parts.pop()  # what follows the last newline: the start of the next line
        if parts:
            first, leaf, length = self._close(parts[0])
            lines, leaves = [first, *parts[1:]], {}
            if leaf is not None:
                leaves[0] = leaf
                self._oversized(self.n, length)
            for i in range(1, len(lines)):
                if len(lines[i]) > self.max_record:
                    leaves[i] = hashlib.sha256(b"\x00" + lines[i]).digest()
                    self._oversized(self.n + i, len(lines[i]))
                    lines[i] = b""
            skip = frozenset(self.n + i for i in leaves)
            self.jobs.append(self.submit(b"\n".join(lines), self.n, skip))
            self._lines(lines, leaves)
            while len(self.jobs) > 4:
                self._merge(self.jobs.popleft())
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
        self.add(Finding(TamperKind.EDITED, p, f"record {p} is {length} bytes, over the "
                         f"{self.max_record}-byte record limit"))

    def partial(self) -> tuple[bytes, int]:
        """The incomplete last line (its first bytes, capped) and its length."""
        return bytes(self.pending), self.pending_len

    def finish(self) -> None:
        while self.jobs:
            self._merge(self.jobs.popleft())
        if self.break_at is not None and self.structural is None:
            self._classify()

    def _merge(self, job: Callable[[], tuple[list[object], list[str]]]) -> None:
        problems, drift = job()
        for p, kind, message in problems:  # type: ignore[misc]
            self.add(Finding(TamperKind(kind), p, message))
        self.drift += drift[:max(0, 3 - len(self.drift))]

    def add(self, finding: Finding) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(finding)
        else:
            self.more += 1

    # -- the hot loop ------------------------------------------------------------------
    def _lines(self, lines: list[bytes], leaves: dict[int, bytes]) -> None:
        sha, search, tree, recent = hashlib.sha256, _CHAIN.search, self.tree, self.recent
        last, n, special = self.last_leaf, self.n, self.special
        next_size = self.next_cp[0] if self.next_cp is not None else -1
        for i, line in enumerate(lines):
            leaf = leaves[i] if i in leaves else sha(b"\x00" + line).digest()
            m = search(line)
            link = (int(m.group(1)), m.group(2), leaf) if m else (None, None, leaf)
            if self.break_at is None:
                if m and (link[0] != n or link[1] != hexlify(last)):
                    self.break_at = n
                    self.after.append(link)
                else:
                    recent.append(link)
            elif self.structural is None:
                self.after.append(link)
                if len(self.after) >= WINDOW:
                    self._classify()
            last = leaf
            tree.append(leaf)
            n += 1
            if n == next_size or n in special:
                self.n, self.last_leaf = n, last
                self._at_size(n)
                next_size = self.next_cp[0] if self.next_cp is not None else -1
        self.n, self.last_leaf = n, last

    def _classify(self) -> None:
        assert self.break_at is not None
        links = [Link(i, bytes.fromhex(p.decode()) if p else None, leaf)
                 for i, p, leaf in (*self.recent, *self.after)]
        self.structural = classify(Window(self.break_at - len(self.recent), links),
                                   self.break_at)
        self.recent.clear()
        self.after = []

    # -- signed roots ------------------------------------------------------------------
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
