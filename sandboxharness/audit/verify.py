"""Offline verification of a log: pure core (:func:`verify_snapshot`) plus file wrappers.

Checks, in one pass: every checkpoint's signature by a trusted key, one origin, no
checkpoint older than one before it, no two roots for one size (fork), the root of every
signed size recomputed from the records, every record canonical and well-formed with its
summary matching its verdict, the ``index``/``prev`` chain, the log not shorter than any
signed or trusted size, and an RFC 9162 consistency proof from each trusted checkpoint.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError, VerificationError
from . import storage
from .analysis import order, roots_at, span, structural_finding
from .checkpoint import SignedCheckpoint, parse_signed_checkpoint, split_sidecar
from .interface import (
    DEFAULT_LIMITS,
    AuditLimits,
    Finding,
    FormatError,
    TamperKind,
    TornTail,
    VerificationResult,
)
from .keys import PublicKey
from .log import sidecar, split_lines
from .merkle import consistency_proof, hash_leaf, verify_consistency
from .note import SignatureMismatch, verified_keys
from .records import is_torn_record, parse_record, summary_mismatches, verdict_schema_problem

_T = TamperKind


class LogTamperedError(VerificationError):
    """Raised by :func:`verify_log`; ``result`` holds every finding."""

    def __init__(self, result: VerificationResult) -> None:
        self.result = result
        super().__init__(result.summary())

    def diagnostics(self) -> str:
        return "\n".join(f.line() for f in self.result.findings)


def _checkpoints(cp_data: bytes, keys: Sequence[PublicKey], limits: AuditLimits,
                 findings: list[Finding]) -> tuple[list[tuple[str, SignedCheckpoint]], list[str],
                                                   int]:
    side = split_sidecar(cp_data, limits)
    valid, key_ids = [], []
    for j, entry in enumerate(side.entries):
        label = f"checkpoint #{j} (byte {entry.offset} of the checkpoints file)"
        try:
            if entry.text is None:
                raise FormatError("not a well-formed signed note")
            sc = parse_signed_checkpoint(entry.text, limits)
        except FormatError as exc:
            findings.append(Finding(_T.MALFORMED_CHECKPOINT, None, f"{label}: {exc}"))
            continue
        label += f" for size {sc.checkpoint.size}"
        try:
            ids = verified_keys(sc.note, keys)
        except SignatureMismatch as exc:
            findings.append(Finding(_T.BAD_SIGNATURE, None, f"{label}: {exc}: it was altered"))
            continue
        if not ids:
            names = ", ".join(sorted({s.name for s in sc.note.signatures}))
            findings.append(Finding(_T.UNTRUSTED_CHECKPOINT, None,
                                    f"{label} has no signature by a trusted key (signed by "
                                    f"{names}; after a key rotation pass every old public key)"))
            continue
        valid.append((label, sc))
        key_ids += [k for k in ids if k not in key_ids]
    return valid, key_ids, side.torn_bytes


def _records(lines: Sequence[bytes], findings: list[Finding],
             warnings: list[str]) -> list[dict[str, Any] | None]:
    """Decode every complete line. A crash leaves only an incomplete last line, so a
    malformed complete line is tampering even after the newest checkpoint."""
    records: list[dict[str, Any] | None] = []
    drift = 0
    for p, line in enumerate(lines):
        try:
            rec, verdict_bytes = parse_record(line)
        except FormatError as exc:
            records.append(None)
            findings.append(Finding(_T.EDITED, p, f"record {p} {exc}"))
            continue
        records.append(rec)
        bad = summary_mismatches(rec, verdict_bytes)
        if bad:
            findings.append(Finding(_T.INCONSISTENT_RECORD, p,
                                    f"record {p}: {', '.join(bad)} disagree with its verdict"))
        problem = verdict_schema_problem(rec)
        if problem and drift < 3:
            drift += 1
            warnings.append(f"record {p}: verdict does not validate against the current model "
                            f"(schema drift, not tampering): {problem}")
    return records


def _compare_roots(by_size: dict[int, dict[bytes, list[str]]], computed: dict[int, bytes],
                   findings: list[Finding]) -> None:
    last_good, reported = 0, False
    for size in sorted(s for s in by_size if s in computed):
        roots = by_size[size]
        if len(roots) > 1:
            labels = "; ".join(" & ".join(v) for v in roots.values())
            findings.append(Finding(_T.FORK, None,
                                    f"validly signed checkpoints disagree about tree size {size} "
                                    f"({labels}): history was rewritten at or before record "
                                    f"{size - 1} and re-signed (signing key misused?)",
                                    record_last=size - 1))
            return
        (root, labels_), = roots.items()
        if root == computed[size]:
            last_good = size
            continue
        if not reported:
            trusted_only = all(lbl.startswith("trusted") for lbl in labels_)
            if trusted_only:  # our own checkpoints agree with the log: it was re-signed
                findings.append(Finding(_T.FORK, None,
                                        f"the log's tree of size {size} is not the one the "
                                        f"trusted checkpoint signed ({labels_[0]}): history was "
                                        f"rewritten at or before record {size - 1} and "
                                        "re-signed", record_last=size - 1))
            else:
                findings.append(Finding(_T.EDITED, last_good,
                                        f"{span(last_good, size - 1)} differs from what was "
                                        f"signed (root mismatch at tree size {size}, "
                                        f"{labels_[0]})", record_last=size - 1))
            reported = True


def verify_snapshot(log_data: bytes, cp_data: bytes | None, keys: Sequence[PublicKey],
                    trusted: Sequence[SignedCheckpoint] = (),
                    limits: AuditLimits = DEFAULT_LIMITS) -> VerificationResult:
    """Verify log bytes and checkpoint-sidecar bytes (None: no sidecar file) against
    trusted keys. No I/O."""
    findings: list[Finding] = []
    if cp_data is None and log_data:
        findings.append(Finding(_T.UNSIGNED_RECORDS, 0, "the checkpoints file is missing: no "
                                "record is signed (a writer creates it before any record)"))
    cp_data = cp_data or b""
    warnings: list[str] = []
    valid, key_ids, cp_torn = _checkpoints(cp_data, keys, limits, findings)
    tagged = valid + [(f"trusted checkpoint #{i}", t) for i, t in enumerate(trusted)]
    # the log's identity: what most of its signed checkpoints say (else the trusted one's)
    origins = Counter(sc.checkpoint.origin for _, sc in valid)
    origin = (origins.most_common(1)[0][0] if origins else
              trusted[0].checkpoint.origin if trusted else None)
    for label, sc in tagged:
        if sc.checkpoint.origin != origin:
            findings.append(Finding(_T.ORIGIN_MISMATCH, None,
                                    f"{label} is for log {sc.checkpoint.origin}, not {origin}"))
    valid = [(lbl, sc) for lbl, sc in valid if sc.checkpoint.origin == origin]
    anchors = [(lbl, sc) for lbl, sc in tagged if sc.checkpoint.origin == origin]
    newest = 0
    for label, sc in valid:  # file order is append order: sizes never go down
        if sc.checkpoint.size < newest:
            findings.append(Finding(_T.ROLLBACK, None, f"{label} was written after a checkpoint "
                                    f"for size {newest}: an older checkpoint was replayed"))
        newest = max(newest, sc.checkpoint.size)
    committed = newest

    lines, partial = split_lines(log_data)
    n = len(lines)
    records = _records(lines, findings, warnings)
    leaves = [hash_leaf(line) for line in lines]
    structural = structural_finding(records, leaves)
    if structural is not None:
        findings.append(structural)
    if partial and not is_torn_record(log_data[len(log_data) - partial:]):
        findings.append(Finding(_T.EDITED, n, f"the {partial} bytes after record {n - 1} are "
                                "not the start of a record: appended by something else"))

    by_size: dict[int, dict[bytes, list[str]]] = {}
    for label, sc in anchors:
        by_size.setdefault(sc.checkpoint.size, {}).setdefault(sc.checkpoint.root, []).append(label)
    computed = roots_at(leaves, set(by_size))
    _compare_roots(by_size, computed, findings)

    if committed > n:
        findings.append(Finding(_T.TRUNCATED, n, f"the log ends after {n} complete records but "
                                f"a signed checkpoint covers {committed}: "
                                f"{span(n, committed - 1)} removed", record_last=committed - 1))
    for i, t in enumerate(trusted):
        size, root = t.checkpoint.size, t.checkpoint.root
        if t.checkpoint.origin != origin:
            continue
        if size > committed and committed <= n:
            findings.append(Finding(_T.ROLLBACK, min(committed, n),
                                    f"trusted checkpoint #{i} has size {size} but the newest "
                                    f"signed checkpoint in the log has size {committed}: the log "
                                    "was rolled back or its tail removed",
                                    record_last=size - 1))
        elif 0 < size < committed <= n and computed.get(size) == root:
            try:
                verify_consistency(size, committed, consistency_proof(leaves, size, committed),
                                   root, computed[committed])
            except VerificationError as exc:
                findings.append(Finding(_T.FORK, None, f"trusted checkpoint #{i}: {exc}"))

    unsigned = max(n - committed, 0)
    if unsigned > limits.max_batch:
        findings.append(Finding(_T.UNSIGNED_RECORDS, committed,
                                f"{unsigned} records after the newest signed checkpoint (size "
                                f"{committed}): more than one crashed append can leave",
                                record_last=n - 1))
    torn = TornTail(unsigned, partial, cp_torn) if (unsigned or partial or cp_torn) else None
    if any("DEVELOPMENT-KEY-NOT-FOR-AUDIT" in k for k in key_ids):
        warnings.append("checkpoints are signed with a DEVELOPMENT key: not valid for audit")
    if n == 0 and not anchors:
        warnings.append("the log is empty")
    ordered = order(findings)
    newest_text = max(valid, key=lambda v: v[1].checkpoint.size)[1].text if valid else None
    return VerificationResult(
        status="tampered" if ordered else "intact", size=min(committed, n),
        root=computed.get(committed), origin=origin, checkpoints=len(valid), findings=ordered,
        torn_tail=torn, warnings=tuple(warnings), key_ids=tuple(key_ids),
        checkpoint_text=newest_text)


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


def get_verification_result(log_path: Path, public_keys: Sequence[PublicKey],
                            trusted_checkpoints: Sequence[str | Path] = (), *,
                            limits: AuditLimits = DEFAULT_LIMITS) -> VerificationResult:
    """Verify the log at ``log_path``; tampering is reported in the result, not raised.
    Missing or malformed *inputs* (log file, keys, trusted checkpoints) raise ``InputError``."""
    if not public_keys:
        raise InputError("at least one trusted public key is required")
    trusted = [load_trusted_checkpoint(t, public_keys, limits) for t in trusted_checkpoints]
    with storage.locked(sidecar(log_path, ".lock"), shared=True):
        log_data = storage.read_bytes(log_path, limits.max_log_bytes, what="audit log")
        cp_data = storage.read_optional(sidecar(log_path, ".checkpoints"),
                                     limits.max_checkpoints_bytes, what="checkpoints file")
    return verify_snapshot(log_data, cp_data, public_keys, trusted, limits)


def verify_log(log_path: Path, public_keys: Sequence[PublicKey],
               trusted_checkpoints: Sequence[str | Path] = (), *,
               limits: AuditLimits = DEFAULT_LIMITS) -> VerificationResult:
    """Like :func:`get_verification_result` but raises :class:`LogTamperedError`."""
    result = get_verification_result(log_path, public_keys, trusted_checkpoints, limits=limits)
    if not result.ok:
        raise LogTamperedError(result)
    return result
