"""Witness cosignatures (https://c2sp.org/tlog-cosignature, Ed25519 ``cosignature/v1``)
and a witness with the semantics of https://c2sp.org/tlog-witness ``add-checkpoint``.

A cosignature is a signed-note signature line ``— <name> base64(key id || u64 time ||
Ed25519 signature)`` on a checkpoint; key id = SHA-256(name || 0x0A || 0x04 || public
key)[:4]; the signed message is ``cosignature/v1\\ntime <time>\\n`` followed by the
checkpoint body. It says: as of that time, this is the largest tree the witness saw for
the origin, consistent with everything it cosigned before.

The witness keeps, per origin, the checkpoint it last cosigned (``DIR/<hash>.cosigned``).
It cosigns a new one only after checking, under a lock on ``DIR`` and before answering:
the log's signature; size not smaller than its last (else a rollback); same root at
equal size (else a split view); an RFC 6962 consistency proof from its last to the new
one (else a split view or a rewritten history). The new state is fsynced first.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import AuditError, InputError, VerificationError
from . import storage
from .checkpoint import SignedCheckpoint, parse_signed_checkpoint
from .interface import DEFAULT_LIMITS, AuditLimits, FormatError
from .keys import PublicKey, Signer, parse_public_key
from .merkle import HASH_SIZE, verify_consistency
from .note import SIG_PREFIX, Note, SignatureMismatch, verified_keys

ALG_COSIGNATURE = 0x04
_HEADER = b"cosignature/v1\n"
_MAX_PROOF = 63


class WitnessRefused(VerificationError):
    """The witness will not cosign: rollback, split view, or a checkpoint it cannot trust."""


def cosigner_key_hash(name: str, raw: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([ALG_COSIGNATURE]) + raw).digest()[:4]


def message(body: str, timestamp: int) -> bytes:
    return _HEADER + b"time %d\n" % timestamp + body.encode()


@dataclass(frozen=True)
class Cosigner:
    """A witness public key. ``name`` None (a PEM key): the signature line names it."""

    raw: bytes
    name: str | None = None

    def matches(self, name: str, hash4: bytes) -> bool:
        return (self.name in (None, name)) and cosigner_key_hash(name, self.raw) == hash4

    def key_id(self, name: str | None = None) -> str:
        name = name or self.name or "?"
        return f"{name}+{cosigner_key_hash(name, self.raw).hex()}"

    def vkey(self) -> str:
        return (f"{self.key_id()}+"
                f"{base64.b64encode(bytes([ALG_COSIGNATURE]) + self.raw).decode()}")


def cosigner_of(signer: Signer) -> Cosigner:
    return Cosigner(signer.public_key.raw, signer.name)


def parse_witness_key(text: str, *, where: str) -> Cosigner:
    """A cosigner vkey (type 0x04), or any Ed25519 public key ``keys generate`` writes."""
    parts = text.strip().split("+", 2)
    if len(parts) == 3 and not text.strip().startswith("-----"):
        try:
            raw = base64.b64decode(parts[2], validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == 33 and raw[0] == ALG_COSIGNATURE:
            key = Cosigner(raw[1:], parts[0])
            if cosigner_key_hash(parts[0], raw[1:]).hex() != parts[1]:
                raise InputError("witness key is corrupt: its key hash does not match",
                                 where=where)
            return key
    public: PublicKey = parse_public_key(text, where=where)
    return Cosigner(public.raw, public.name)


def read_witness_keys(paths: Sequence[Path]) -> list[Cosigner]:
    return [parse_witness_key(storage.read_text_file(p, 16 << 10, what="witness key"),
                              where=str(p)) for p in paths]


def cosign(body: str, signer: Signer, timestamp: int) -> str:
    """One cosignature line (with its newline) on the checkpoint ``body``."""
    name, raw = signer.name, signer.public_key.raw
    sig = signer.sign(message(body, timestamp))
    blob = cosigner_key_hash(name, raw) + struct.pack(">Q", timestamp) + sig
    return f"{SIG_PREFIX}{name} {base64.b64encode(blob).decode()}\n"


def cosignatures(note: Note, witnesses: Sequence[Cosigner]) -> list[tuple[str, int]]:
    """(key id, time) of each valid cosignature by ``witnesses``; a line that claims one
    of them but does not verify raises :class:`SignatureMismatch`."""
    found = []
    for sig in note.signatures:
        for w in witnesses:
            if not w.matches(sig.name, sig.key_hash):
                continue
            if len(sig.signature) != 72:
                raise SignatureMismatch(f"cosignature by {w.key_id(sig.name)} is malformed")
            (when,) = struct.unpack(">Q", sig.signature[:8])
            if when >= 1 << 63 or not PublicKey(w.raw).verify(sig.signature[8:],
                                                                message(note.text, when)):
                raise SignatureMismatch(f"cosignature by {w.key_id(sig.name)} does not verify")
            found.append((w.key_id(sig.name), when))
    return found


def request_body(old_size: int, proof: Sequence[bytes], checkpoint_text: str) -> bytes:
    """A tlog-witness ``add-checkpoint`` request body."""
    lines = [f"old {old_size}", *(base64.b64encode(h).decode() for h in proof), ""]
    return ("\n".join(lines) + "\n" + checkpoint_text).encode()


def _parse_request(body: bytes) -> tuple[int, list[bytes], str]:
    try:
        text = body.decode("utf-8")
        head, note = text.split("\n\n", 1)
        first, *proof_lines = head.split("\n")
        if not first.startswith("old ") or not first[4:].isdigit() or \
                (first[4:] != "0" and first[4:].startswith("0")):
            raise ValueError("bad old size line")
        proof = [base64.b64decode(p, validate=True) for p in proof_lines]
    except (UnicodeDecodeError, ValueError, binascii.Error) as exc:
        raise WitnessRefused(f"malformed add-checkpoint request: {exc}") from None
    if len(proof) > _MAX_PROOF or any(len(h) != HASH_SIZE for h in proof):
        raise WitnessRefused("malformed add-checkpoint request: bad consistency proof lines")
    return int(first[4:]), proof, note


def state_name(origin: str) -> str:
    return hashlib.sha256(origin.encode()).hexdigest()[:32] + ".cosigned"


def read_state(d: storage.LogDir, origin: str, limits: AuditLimits) -> SignedCheckpoint | None:
    name = state_name(origin)
    if d.lstat(name) is None:
        return None
    fd = d.open(name, os.O_RDONLY, action="cannot read the witness state")
    try:
        text = storage.pread(fd, limits.max_note_bytes + 1, 0, d.where(name))
    finally:
        os.close(fd)
    try:
        return parse_signed_checkpoint(text.decode(), limits)
    except (UnicodeDecodeError, FormatError) as exc:
        raise AuditError(f"{d.where(name)}: the witness state is damaged ({exc}); refusing to "
                         "cosign (a witness that lost its state must not start over)") from None


def _ours(sc: SignedCheckpoint, witness: Signer) -> bool:
    try:
        return bool(cosignatures(sc.note, [cosigner_of(witness)]))
    except SignatureMismatch:
        return False


def open_state_dir(path: Path) -> storage.LogDir:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the witness state directory: {exc.strerror}",
                         where=str(path)) from None
    return storage.LogDir(path)


def add_checkpoint(state_dir: Path, body: bytes, log_keys: Sequence[PublicKey],
                   witness: Signer, *, now: int, limits: AuditLimits = DEFAULT_LIMITS) -> str:
    """Check an add-checkpoint request and cosign; returns the cosignature line. The new
    state is on disk before this returns (check and update under one lock)."""
    old_size, proof, text = _parse_request(body)
    try:
        sc = parse_signed_checkpoint(text, limits)
        if not verified_keys(sc.note, log_keys):
            raise WitnessRefused("the checkpoint has no signature by a trusted log key")
    except (FormatError, SignatureMismatch) as exc:
        raise WitnessRefused(f"not a valid signed checkpoint: {exc}") from None
    cp = sc.checkpoint
    d = open_state_dir(state_dir)
    try:
        storage.flock(d.fd, fcntl.LOCK_EX, state_dir)
        last = read_state(d, cp.origin, limits)
        if last is not None and not _ours(last, witness):
            raise AuditError(f"{d.where(state_name(cp.origin))}: the witness state is not "
                             "cosigned by this witness key; refusing to cosign")
        have = last.checkpoint.size if last else 0
        if cp.size < have:
            raise WitnessRefused(f"rollback: {cp.origin} offers size {cp.size}, but this "
                                 f"witness already cosigned size {have}")
        if old_size > cp.size:
            raise WitnessRefused(f"old size {old_size} is larger than the checkpoint's "
                                 f"{cp.size}")
        if old_size != have:
            raise WitnessRefused(f"conflict: the request extends size {old_size}, this witness "
                                 f"last cosigned size {have}")
        if have == 0:
            if proof:
                raise WitnessRefused("a consistency proof from size 0 must be empty")
        elif cp.size == have:
            if cp.root != last.checkpoint.root:  # type: ignore[union-attr]
                raise WitnessRefused(f"split view: two different roots for size {have} of "
                                     f"{cp.origin}")
        else:
            try:
                verify_consistency(have, cp.size, proof, last.checkpoint.root,  # type: ignore[union-attr]
                                   cp.root)
            except VerificationError as exc:
                raise WitnessRefused(f"split view: size {cp.size} is not consistent with the "
                                     f"size {have} this witness cosigned ({exc})") from None
        line = cosign(sc.note.text, witness, now)
        d.write_new(state_name(cp.origin), (text + line).encode(), sync=True)
        return line
    finally:
        d.close()
