"""Offline verification of a log, streamed: memory does not grow with the log.

Checks: every checkpoint's signature by a trusted key, one origin, no checkpoint older
than one before it, no two roots for one size (fork), the root at every signed size
recomputed from the records, every record canonical and well-formed with its summary
matching its verdict, the ``index``/``prev`` chain, the log not shorter than any signed,
trusted or witnessed size, and - with witness keys - a witness cosignature covering it.
Findings name the first bad record exactly when the evidence allows it (the chain does
for any single edit, insertion or deletion; roots only to the checkpoints' granularity).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..errors import InputError, VerificationError
from . import storage
from .analysis import order
from .checkpoint import SignedCheckpoint, parse_signed_checkpoint
from .content import chain_only, check_records
from .cpscan import Checkpoints, in_order, ordered, read_checkpoints
from .interface import DEFAULT_LIMITS, AuditLimits, FormatError, VerificationResult
from .keys import PublicKey
from .note import SignatureMismatch, verified_keys
from .roots import Anchors, root_findings, summarize, tail_findings
from .scan import LogScan
from .witness import Cosigner
from .witnessed import collect_witnessed

_PARALLEL_BYTES = 32 << 20  # below this, worker start-up costs more than it saves


class LogTamperedError(VerificationError):
    """Raised by :func:`verify_log`; ``result`` holds every finding."""

    def __init__(self, result: VerificationResult) -> None:
        self.result = result
        super().__init__(result.summary())

    def diagnostics(self) -> str:
        return "\n".join(f.line() for f in self.result.findings)


def _inline_records(region: object, data: Callable[[], bytes], first: int,
                    skip: frozenset[int]) -> Callable[[], object]:
    found = check_records(data(), first, skip)
    return lambda: found


def _chain_only(region: object, data: Callable[[], bytes], first: int,
                skip: frozenset[int]) -> Callable[[], object]:
    found = chain_only(data(), first, skip)
    return lambda: found


def run(log_chunks: Iterable[bytes], cp_chunks: Iterable[bytes] | None,
        keys: Sequence[PublicKey], anchors: Anchors, limits: AuditLimits,
        *, pool: object = None, log_fd: int = -1, content: bool = True) -> VerificationResult:
    """The whole verification over two byte streams (``cp_chunks`` None: no sidecar).
    ``content=False``: no per-record content checks (integrity only)."""
    sub_cp = sub_rec = None
    if pool is not None:
        p = pool

        def sub_cp(entries: object) -> Callable[[], object]:
            ticket = p.submit("checkpoints", entries, keys, limits)  # type: ignore[attr-defined]
            return lambda: p.result(ticket)  # type: ignore[attr-defined]

        def sub_rec(region: tuple[int, int] | None, data: Callable[[], bytes], first: int,
                    skip: frozenset[int]) -> Callable[[], object]:
            if region is not None and log_fd >= 0:  # the worker reads the lines itself
                ticket = p.submit("region", log_fd, *region, first)  # type: ignore[attr-defined]
            else:
                ticket = p.submit("records", data(), first, skip)  # type: ignore[attr-defined]
            return lambda: p.result(ticket)  # type: ignore[attr-defined]

    cps = read_checkpoints(cp_chunks or (), keys, limits, sub_cp)  # type: ignore[arg-type]
    try:
        return _judge(cps, log_chunks, cp_chunks is None, anchors, limits=limits,
                      sub_rec=sub_rec if content else _chain_only)
    finally:
        cps.rows.close()


def _judge(cps: Checkpoints, log_chunks: Iterable[bytes], cp_missing: bool, anchors: Anchors,
           *, limits: AuditLimits, sub_rec: object) -> VerificationResult:
    origin, findings = anchors.choose_origin(cps)
    oid = cps.origins.index(origin) if origin in cps.origins else -1
    committed, anomalies, rollbacks = ordered(cps, oid)
    special = {a.size for a in anomalies} | anchors.sizes() | {committed}
    scan = LogScan(in_order(cps, oid), special, limits.max_record_bytes,
                   sub_rec or _inline_records)  # type: ignore[arg-type]
    for chunk in log_chunks:
        scan.feed(chunk)
    scan.finish()
    findings += cps.findings + rollbacks + scan.findings
    if scan.structural is not None:
        findings.append(scan.structural)
    findings += root_findings(scan, anomalies, anchors, committed, findings)
    findings += tail_findings(scan, committed, cp_missing, limits)
    return summarize(scan, cps, oid, origin, committed, findings=order(findings), anchors=anchors)


def verify_snapshot(log_data: bytes, cp_data: bytes | None, keys: Sequence[PublicKey],
                    trusted: Sequence[SignedCheckpoint] = (),
                    limits: AuditLimits = DEFAULT_LIMITS) -> VerificationResult:
    """Verify log bytes and checkpoint-sidecar bytes (None: no sidecar file) against
    trusted keys. No I/O."""
    anchors = Anchors([(f"trusted checkpoint #{i}", t) for i, t in enumerate(trusted)])
    return run([log_data], None if cp_data is None else [cp_data], keys, anchors, limits)


def load_trusted_checkpoint(source: str | Path, keys: Sequence[PublicKey],
                            limits: AuditLimits = DEFAULT_LIMITS) -> SignedCheckpoint:
    """A checkpoint the caller trusts (note text or file); bad input -> ``InputError``."""
    where = str(source) if isinstance(source, Path) else "trusted checkpoint"
    text = (storage.read_text_file(source, limits.max_note_bytes, what="checkpoint")
            if isinstance(source, Path) else source)
    try:
        sc = parse_signed_checkpoint(text, limits)
        if not verified_keys(sc.note, keys):
            raise InputError("checkpoint has no signature by a trusted key", where=where)
    except (FormatError, SignatureMismatch) as exc:
        raise InputError(f"not a valid signed checkpoint: {exc}", where=where) from None
    return sc


def _workers(requested: int | None, size: int) -> int:
    if requested is not None:
        return max(0, requested)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(cpus or 1, 4) if size >= _PARALLEL_BYTES and (cpus or 1) > 1 else 0


def get_verification_result(log_path: Path, public_keys: Sequence[PublicKey],
                            trusted_checkpoints: Sequence[str | Path] = (), *,
                            limits: AuditLimits = DEFAULT_LIMITS,
                            witness_keys: Sequence[Cosigner] = (),
                            witness_state: Path | None = None,
                            workers: int | None = None,
                            content: bool = True) -> VerificationResult:
    """Verify the log at ``log_path``; tampering is reported in the result, not raised.
    Missing or malformed *inputs* (log file, keys, trusted checkpoints) raise ``InputError``.
    With ``witness_keys``, a checkpoint cosigned by one of them (from ``LOG.witness`` or
    the witness's ``witness_state`` directory) must cover the log. ``content=False``
    checks integrity only - signatures, roots, chain, truncation, forks - and not each
    record's content (canonical form, summary against verdict, schema): several times
    faster, blind only to what a holder of the signing key could write anyway."""
    if not public_keys:
        raise InputError("at least one trusted public key is required")
    trusted = [load_trusted_checkpoint(t, public_keys, limits) for t in trusted_checkpoints]
    fd = storage.open_input(log_path, what="audit log")
    cp_path = log_path.with_name(log_path.name + ".checkpoints")
    cp_fd = None
    try:
        storage.flock(fd, fcntl.LOCK_SH, log_path)  # writers hold it exclusively to commit
        cp_fd = storage.open_optional(cp_path, what="checkpoints file")
        sizes = [os.fstat(f).st_size for f in (fd, cp_fd) if f is not None]
        if sizes[0] > limits.max_log_bytes or (cp_fd is not None and
                                               sizes[1] > limits.max_checkpoints_bytes):
            raise InputError("over the configured size limit", where=str(log_path))
        anchors = Anchors([(f"trusted checkpoint #{i}", t) for i, t in enumerate(trusted)])
        if witness_keys:
            anchors.witnessed, anchors.extra = collect_witnessed(
                log_path, witness_state, public_keys, witness_keys, limits)
            anchors.required = True
        log_chunks = storage.iter_chunks(fd, sizes[0], log_path)
        cp_chunks = (storage.iter_chunks(cp_fd, sizes[1], cp_path)
                     if cp_fd is not None else None)
        n = _workers(workers, sum(sizes)) if content else 0
        if n == 0:
            return run(log_chunks, cp_chunks, public_keys, anchors, limits, content=content)
        from .pool import Pool

        with Pool(n, pass_fds=(fd,)) as pool:
            return run(log_chunks, cp_chunks, public_keys, anchors, limits, pool=pool, log_fd=fd)
    finally:
        os.close(fd)
        if cp_fd is not None:
            os.close(cp_fd)


def verify_log(log_path: Path, public_keys: Sequence[PublicKey],
               trusted_checkpoints: Sequence[str | Path] = (), *,
               limits: AuditLimits = DEFAULT_LIMITS, allow_unsigned_tail: bool = True,
               witness_keys: Sequence[Cosigner] = (),
               witness_state: Path | None = None) -> VerificationResult:
    """Like :func:`get_verification_result` but raises :class:`LogTamperedError` - also
    for records after the newest checkpoint unless ``allow_unsigned_tail``."""
    result = get_verification_result(log_path, public_keys, trusted_checkpoints, limits=limits,
                                     witness_keys=witness_keys, witness_state=witness_state)
    if not result.ok or (not allow_unsigned_tail and result.unsigned_tail):
        raise LogTamperedError(result)
    return result
