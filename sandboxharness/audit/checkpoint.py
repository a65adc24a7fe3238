"""C2SP tlog-checkpoints (https://c2sp.org/tlog-checkpoint) and the checkpoints sidecar.

Checkpoint body (the signed note text)::

    <origin>
    <tree size, decimal>
    <base64 root hash>

The sidecar ``<LOG>.checkpoints`` is the concatenation of signed notes, each followed by
one extra empty line, in the order they were written (one per append). An entry is
complete only once that empty line is written; an incomplete last entry is a torn tail.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from dataclasses import dataclass

from .interface import DEFAULT_LIMITS, AuditLimits, FormatError
from .keys import Signer
from .merkle import HASH_SIZE
from .note import SIG_PREFIX, Note, parse_note, sign_note

_SIZE_RE = re.compile(r"0|[1-9][0-9]{0,19}")
_SIG_PREFIX_B = SIG_PREFIX.encode()
_NAME = r"[!-*,-~]"
_SIG_LINE = re.compile(rf"\u2014 {_NAME}+ [A-Za-z0-9+/]+={{0,2}}")
_SIG_PART = re.compile(rf"(?:\u2014(?: (?:{_NAME}+(?: [A-Za-z0-9+/=]*)?)?)?)?")


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def body(self) -> str:
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode(),
                 *self.extensions]
        return "\n".join(lines) + "\n"


def parse_body(text: str) -> Checkpoint:
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "":
        raise FormatError("checkpoint body needs origin, size and root hash lines")
    origin, size, root, *ext = lines[:-1]
    if not origin or origin != origin.strip() or " " in origin or "+" in origin:
        raise FormatError("bad origin line")
    if not _SIZE_RE.fullmatch(size) or int(size) >= 1 << 64:
        raise FormatError(f"bad tree size line {size[:40]!r}")
    try:
        raw = base64.b64decode(root, validate=True)
    except (binascii.Error, ValueError):
        raise FormatError("root hash is not base64") from None
    if len(raw) != HASH_SIZE or base64.b64encode(raw).decode() != root:
        raise FormatError("root hash is not a canonical base64 SHA-256")
    if any(not e for e in ext):
        raise FormatError("empty extension line")
    return Checkpoint(origin=origin, size=int(size), root=raw, extensions=tuple(ext))


@dataclass(frozen=True)
class SignedCheckpoint:
    checkpoint: Checkpoint
    note: Note
    text: str
    """The full signed note as stored."""


def sign_checkpoint(checkpoint: Checkpoint, signer: Signer) -> str:
    return sign_note(checkpoint.body(), [signer])


def parse_signed_checkpoint(text: str, limits: AuditLimits = DEFAULT_LIMITS) -> SignedCheckpoint:
    note = parse_note(text, max_bytes=limits.max_note_bytes,
                      max_signatures=limits.max_signatures)
    return SignedCheckpoint(checkpoint=parse_body(note.text), note=note, text=text)


def _complete_line_ok(i: int, line: str) -> bool:
    if i == 0:
        return bool(re.fullmatch(f"{_NAME}+", line))
    if i == 1:
        return bool(_SIZE_RE.fullmatch(line))
    if i == 2:
        return bool(re.fullmatch(r"[A-Za-z0-9+/]{43}=", line))
    if i == 3:
        return line == ""
    if i == 4 and _SIG_LINE.fullmatch(line):
        text = line.rsplit(" ", 1)[1]
        try:
            blob = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            return False
        return len(blob) == 68 and base64.b64encode(blob).decode() == text
    return False


def _partial_line_ok(i: int, line: str) -> bool:
    patterns = {0: f"{_NAME}*", 1: "[0-9]*", 2: "[A-Za-z0-9+/=]*", 3: "", 5: ""}
    if i in patterns:
        return bool(re.fullmatch(patterns[i], line))
    return i == 4 and bool(_SIG_PART.fullmatch(line))


def is_torn_prefix(data: bytes) -> bool:
    """Whether ``data`` can be the start of an entry our writer writes in one ``write``
    (origin, size, root, blank line, ONE signature line, blank line): what a crash can
    leave. Anything else at the end of the file was put there by someone else."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(data, final=False)
    except UnicodeDecodeError:
        return False
    pending = decoder.getstate()[0]  # the start of a multi-byte character
    *complete, partial = text.split("\n")
    i = len(complete)
    if i > 5 or (pending and not (i == 4 and partial == "")):
        return False
    return (all(_complete_line_ok(k, line) for k, line in enumerate(complete))
            and _partial_line_ok(i, partial))


@dataclass(frozen=True)
class SidecarEntry:
    offset: int
    """Byte offset of the entry in the sidecar."""
    text: str | None
    """The note text; None when the entry's bytes are not UTF-8 or too large."""


@dataclass(frozen=True)
class Sidecar:
    entries: tuple[SidecarEntry, ...]
    complete_bytes: int
    """Length of the prefix made of complete entries; the rest is a torn tail."""
    torn_bytes: int


class SidecarReader:
    """Cut the sidecar into entries (body lines, empty line, signature lines, empty line)
    as its bytes stream in: memory is bounded by one entry (capped at the note limit)."""

    def __init__(self, limits: AuditLimits = DEFAULT_LIMITS) -> None:
        self.cap = limits.max_note_bytes
        self.pos = 0  # bytes consumed so far (complete lines)
        self.start = 0  # where the current entry starts
        self.entry = bytearray()  # its bytes so far (up to cap + 1)
        self.pending = bytearray()  # the start of an incomplete line (up to cap + 1)
        self.pending_len = 0  # its true length
        self.state = "body"  # body -> sigs (or garbage) -> (empty line) -> body
        self.body_lines = self.sig_lines = 0

    def feed(self, data: bytes) -> list[SidecarEntry]:
        out: list[SidecarEntry] = []
        begin = 0
        while True:
            nl = data.find(b"\n", begin)
            piece = data[begin:] if nl < 0 else data[begin:nl]
            room = max(0, self.cap + 1 - len(self.pending))
            if nl < 0:
                self.pending += piece[:room]
                self.pending_len += len(piece)
                return out
            if self.pending_len:
                line, length = bytes(self.pending) + piece[:room], self.pending_len + len(piece)
                self.pending.clear()
                self.pending_len = 0
            else:
                line, length = piece, len(piece)
            begin = nl + 1
            self._line(line, length, out)

    def _line(self, line: bytes, length: int, out: list[SidecarEntry]) -> None:
        self.pos += length + 1
        if len(self.entry) <= self.cap:
            self.entry += line[:self.cap + 1] + b"\n"
        if self.state == "body":
            if line:
                self.body_lines += 1
            elif self.body_lines:
                self.state = "sigs"
            else:  # an empty line where a note should start: count it as its own bad entry
                out.append(SidecarEntry(self.start, None))
                self._reset()
            return
        if line:
            self.sig_lines += 1
            if not line.startswith(_SIG_PREFIX_B):
                self.state = "garbage"
            return
        text: str | None = None  # the note: the entry without its separating empty line
        if self.pos - 1 - self.start <= self.cap and self.state != "garbage" and self.sig_lines:
            try:
                text = bytes(self.entry[:-1]).decode("utf-8")
            except UnicodeDecodeError:
                text = None
        out.append(SidecarEntry(self.start, text))
        self._reset()

    def _reset(self) -> None:
        self.start, self.state, self.body_lines, self.sig_lines = self.pos, "body", 0, 0
        self.entry.clear()

    def finish(self) -> tuple[list[SidecarEntry], int, int]:
        """Entries found at the end, complete bytes, torn bytes."""
        rest_len = self.pos - self.start + self.pending_len
        if not rest_len:
            return [], self.start, 0
        if rest_len > self.cap or not is_torn_prefix(bytes(self.entry) + bytes(self.pending)):
            return [SidecarEntry(self.start, None)], self.start + rest_len, 0  # not a crash
        return [], self.start, rest_len


def split_sidecar(data: bytes, limits: AuditLimits = DEFAULT_LIMITS) -> Sidecar:
    """All entries of a sidecar held in memory (see :class:`SidecarReader`)."""
    reader = SidecarReader(limits)
    entries = reader.feed(data)
    last, complete, torn = reader.finish()
    return Sidecar(entries=tuple(entries + last), complete_bytes=complete, torn_bytes=torn)
