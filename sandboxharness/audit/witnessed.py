"""Witnessing a log file (``audit witness``) and finding its witnessed checkpoints
(``audit verify --witness-key``).

The local witness builds the tlog-witness request a log would send - its newest
checkpoint and the consistency proof from the size the witness last cosigned, computed
from the records in one streaming pass - and hands it to :func:`.witness.add_checkpoint`,
which checks it against the witness's own state. The cosigned checkpoint is appended to
``LOG.witness`` (and kept in the witness's state directory, the copy a reviewer can trust
when the log's machine is not trusted).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import InputError
from . import storage
from .checkpoint import SidecarReader, SignedCheckpoint, parse_signed_checkpoint
from .interface import DEFAULT_LIMITS, AuditLimits, FormatError, TamperFinding, TamperKind
from .keys import PublicKey, Signer
from .merkle import consistency_ranges, hash_leaf, range_hashes
from .note import SignatureMismatch, verified_keys
from .witness import Cosigner, add_checkpoint, cosignatures, open_state_dir, request_body

Anchor = tuple[str, SignedCheckpoint, bool, tuple[str, ...]]
"""(label, checkpoint, from the witness's own state directory, witness key ids)."""


def iter_leaves(fd: int, where: object, limit: int | None = None) -> Iterator[bytes]:
    """Leaf hashes of the complete lines of a log file (streamed), at most ``limit``."""
    pending, count = b"", 0
    for chunk in storage.iter_chunks(fd, os.fstat(fd).st_size, where):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            if limit is not None and count >= limit:
                return
            count += 1
            yield hash_leaf(line)


def checkpoint_entries(path: Path, limits: AuditLimits) -> Iterator[tuple[int, str | None]]:
    fd = storage.open_optional(path, what="checkpoints file")
    if fd is None:
        return
    try:
        reader, j = SidecarReader(limits), 0
        for chunk in storage.iter_chunks(fd, os.fstat(fd).st_size, path):
            for entry in reader.feed(chunk):
                yield j, entry.text
                j += 1
        for entry in reader.finish()[0]:
            yield j, entry.text
            j += 1
    finally:
        os.close(fd)


def newest_checkpoint(log_path: Path, log_keys: Sequence[PublicKey],
                      limits: AuditLimits) -> SignedCheckpoint:
    newest = None
    for _, text in checkpoint_entries(log_path.with_name(log_path.name + ".checkpoints"), limits):
        try:
            sc = parse_signed_checkpoint(text or "", limits)
            if verified_keys(sc.note, log_keys):
                newest = sc
        except (FormatError, SignatureMismatch):
            continue
    if newest is None:
        raise InputError("no checkpoint signed by a trusted log key", where=str(log_path))
    return newest


def witness_log(log_path: Path, log_keys: Sequence[PublicKey], witness: Signer,
                state_dir: Path, *, limits: AuditLimits = DEFAULT_LIMITS,
                now: int | None = None) -> tuple[SignedCheckpoint, str]:
    """Cosign the log's newest checkpoint; returns it and the cosigned note (also appended
    to ``LOG.witness``). Refusals raise :class:`.witness.WitnessRefused` (exit 1)."""
    if any(k.raw == witness.public_key.raw for k in log_keys):
        raise InputError("the witness key is the log's own key: a witness must be "
                         "independent of the log", where=str(log_path))
    fd = storage.open_input(log_path, what="audit log")
    try:
        storage.flock(fd, fcntl.LOCK_SH, log_path)
        sc = newest_checkpoint(log_path, log_keys, limits)
        d = open_state_dir(state_dir)
        try:
            from .witness import read_state

            last = read_state(d, sc.checkpoint.origin, limits)
        finally:
            d.close()
        old = last.checkpoint.size if last else 0
        proof: list[bytes] = []
        if 0 < old < sc.checkpoint.size:
            ranges = consistency_ranges(old, sc.checkpoint.size)
            try:
                proof = range_hashes(iter_leaves(fd, log_path, sc.checkpoint.size), ranges)
            except ValueError:
                proof = []  # the log is shorter than its checkpoint: the witness refuses
    finally:
        os.close(fd)
    line = add_checkpoint(state_dir, request_body(old, proof, sc.text), log_keys, witness,
                          now=int(time.time()) if now is None else now, limits=limits)
    cosigned = sc.text + line
    _append(log_path.with_name(log_path.name + ".witness"), cosigned + "\n")
    return sc, cosigned


def _append(path: Path, text: str) -> None:
    d = storage.LogDir(path.parent)
    try:
        fd = d.open(path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, action="cannot open")
        try:
            storage.flock(fd, fcntl.LOCK_EX, path)
            storage.append(fd, text.encode(), path)
        finally:
            os.close(fd)
        d.fsync()
    finally:
        d.close()


def collect_witnessed(log_path: Path, state_dir: Path | None, log_keys: Sequence[PublicKey],
                      witnesses: Sequence[Cosigner], limits: AuditLimits = DEFAULT_LIMITS
                      ) -> tuple[list[Anchor], list[TamperFinding]]:
    """Checkpoints with a valid log signature and a valid witness cosignature, from
    ``LOG.witness`` and the witness's state directory; findings for altered ones."""
    anchors: list[Anchor] = []
    findings: list[TamperFinding] = []
    sources: list[tuple[str, str | None, bool]] = [
        (f"witnessed checkpoint #{j}", text, False)
        for j, text in checkpoint_entries(log_path.with_name(log_path.name + ".witness"), limits)]
    if state_dir is not None:
        if not state_dir.is_dir():
            raise InputError("witness state directory not found", where=str(state_dir))
        for name in sorted(os.listdir(state_dir))[:10_000]:
            if name.endswith(".cosigned"):
                state = storage.read_text_file(state_dir / name, limits.max_note_bytes,
                                               what="witness state")
                sources.append((f"witness state {name}", state, True))
    for source, note, own in sources:
        try:
            sc = parse_signed_checkpoint(note or "", limits)
            signed = verified_keys(sc.note, log_keys)
            cosigned = cosignatures(sc.note, witnesses)
        except (FormatError, SignatureMismatch) as exc:
            findings.append(TamperFinding(TamperKind.BAD_SIGNATURE, None, f"{source}: {exc}"))
            continue
        if signed and cosigned:
            anchors.append((f"{source} for size {sc.checkpoint.size}", sc, own,
                            tuple(k for k, _ in cosigned)))
    return anchors, findings
