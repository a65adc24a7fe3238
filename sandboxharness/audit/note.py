"""C2SP signed notes (https://c2sp.org/signed-note), Ed25519 only.

A note is UTF-8 text ending in a newline, a blank line, then signature lines
``— <name> <base64(4-byte key hash || 64-byte signature)>``. The signed message is the
text (everything before the blank line, including its final newline). Byte-compatible
with Go's ``golang.org/x/mod/sumdb/note`` (tested against its published example).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .interface import DEFAULT_LIMITS, FormatError
from .keys import PublicKey, Signer, valid_name

SIG_PREFIX = "\u2014 "  # em dash, space
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f]")


@dataclass(frozen=True)
class NoteSignature:
    name: str
    key_hash: bytes
    signature: bytes


@dataclass(frozen=True)
class Note:
    text: str
    """The signed text, ending with a newline."""
    signatures: tuple[NoteSignature, ...]


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise FormatError("note text must end with a newline")
    if "\n\n" in text or text.startswith("\n"):
        raise FormatError("note text must not contain blank lines")
    if _CONTROL.search(text):
        raise FormatError("note text contains control characters")


def _sig_line(name: str, hash4: bytes, sig: bytes) -> str:
    return f"{SIG_PREFIX}{name} {base64.b64encode(hash4 + sig).decode()}\n"


def sign_note(text: str, signers: Sequence[Signer]) -> str:
    """The full signed note (text, blank line, one signature line per signer)."""
    _check_text(text)
    lines = "".join(_sig_line(s.name, s.public_key.key_hash(), s.sign(text.encode()))
                    for s in signers)
    return f"{text}\n{lines}"


def parse_note(data: str, *, max_bytes: int = DEFAULT_LIMITS.max_note_bytes,
               max_signatures: int = DEFAULT_LIMITS.max_signatures) -> Note:
    if len(data.encode()) > max_bytes:
        raise FormatError(f"note is over the {max_bytes}-byte limit")
    if not data.endswith("\n"):
        raise FormatError("note must end with a newline")
    split = data.rfind("\n\n")
    if split < 0:
        raise FormatError("note has no signature block (blank line)")
    text, block = data[: split + 1], data[split + 2:]
    _check_text(text)
    sigs = []
    for line in block.splitlines():
        if not line.startswith(SIG_PREFIX):
            raise FormatError("signature lines must start with an em dash and a space")
        fields = line[len(SIG_PREFIX):].split(" ")
        if len(fields) != 2 or not valid_name(fields[0]):
            raise FormatError("malformed signature line")
        try:
            blob = base64.b64decode(fields[1], validate=True)
        except (binascii.Error, ValueError):
            raise FormatError("signature is not base64") from None
        if len(blob) < 5:
            raise FormatError("signature too short")
        if base64.b64encode(blob).decode() != fields[1]:  # e.g. non-zero padding bits
            raise FormatError("signature is not canonical base64")
        sigs.append(NoteSignature(fields[0], blob[:4], blob[4:]))
    if not sigs:
        raise FormatError("note has no signatures")
    if len(sigs) > max_signatures:
        raise FormatError(f"note has more than {max_signatures} signatures")
    return Note(text=text, signatures=tuple(sigs))


class SignatureMismatch(FormatError):
    """A trusted key's signature on the note does not verify: the note was altered."""


def verified_keys(note: Note, keys: Sequence[PublicKey]) -> list[str]:
    """Key ids (``name+hash``) of trusted keys with a valid signature on ``note``.

    Signatures by unknown keys are ignored (as the spec requires); a signature that claims
    a trusted key (name and key hash match) but does not verify raises
    :class:`SignatureMismatch`. An empty list means: no trusted signature.
    """
    found: list[str] = []
    message = note.text.encode()
    for sig in note.signatures:
        for key in keys:
            if not key.matches(sig.name, sig.key_hash):
                continue
            if len(sig.signature) != 64 or not key.verify(sig.signature, message):
                raise SignatureMismatch(
                    f"signature by {sig.name}+{sig.key_hash.hex()} does not verify")
            kid = f"{sig.name}+{sig.key_hash.hex()}"
            if kid not in found:
                found.append(kid)
    return found
