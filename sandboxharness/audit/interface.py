"""Value types the audit layer exchanges, its size caps, and its internal format error.

Nothing here does I/O. Verification results are plain data: a tampered log is a
*result* (``status == "tampered"``) from :func:`get_verification_result`, and an
exception (:class:`~sandboxharness.errors.VerificationError`) from :func:`verify_log`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from pydantic import Field

from ..models._base import FrozenModel


class AuditLimits(FrozenModel):
    """Caps on every untrusted input the audit layer reads."""

    max_log_bytes: int = Field(default=1 << 40, gt=0)
    """Largest log file that is read (verification streams it: memory does not grow with
    it; views and proofs that hold it in memory use ``max_view_bytes``)."""
    max_record_bytes: int = Field(default=4 << 20, gt=0)
    """Largest single record line; the writer refuses bigger verdicts."""
    max_checkpoints_bytes: int = Field(default=1 << 40, gt=0)
    """Largest checkpoints sidecar file (streamed like the log)."""
    max_view_bytes: int = Field(default=1 << 30, gt=0)
    """Largest log that ``audit show``/``export`` read into memory."""
    max_note_bytes: int = Field(default=16 << 10, gt=0)
    """Largest single signed note (checkpoint) including its signature lines."""
    max_signatures: int = Field(default=16, gt=0)
    """Most signature lines accepted on one note."""
    max_batch: int = Field(default=64, gt=0)
    """Most records one append writes; also the most records a crash can leave unsigned,
    so a longer unsigned tail is reported as tampering, not as a torn tail."""
    max_proof_bytes: int = Field(default=1 << 20, gt=0)
    """Largest proof bundle or attestation envelope that is read."""


DEFAULT_LIMITS = AuditLimits()


class TamperKind(StrEnum):
    """What kind of tampering a finding points to. Values are stable (used in JSON output)."""

    EDITED = "edited-record"
    """A record's bytes differ from what was signed (or no longer parse)."""
    DELETED = "deleted-record"
    """A record was removed from the middle of the log."""
    INSERTED = "inserted-record"
    """A record that was never signed was put between signed ones."""
    REORDERED = "reordered-records"
    """Signed records appear in a different order."""
    BROKEN_CHAIN = "broken-chain"
    """A record's ``prev`` does not name the record before it."""
    INCONSISTENT_RECORD = "inconsistent-record"
    """A record's summary fields disagree with the verdict it carries."""
    TRUNCATED = "truncated-tail"
    """Records at the end were removed: the log is shorter than a signed checkpoint."""
    ROLLBACK = "rollback"
    """Log and checkpoints were put back to an older state, or an older checkpoint replayed."""
    FORK = "fork"
    """Two validly signed checkpoints disagree about the same tree size."""
    BAD_SIGNATURE = "bad-signature"
    """A checkpoint's signature by a trusted key does not verify (checkpoint edited)."""
    UNTRUSTED_CHECKPOINT = "untrusted-checkpoint"
    """A checkpoint carries no signature by any trusted key."""
    MALFORMED_CHECKPOINT = "malformed-checkpoint"
    """A complete checkpoint entry that does not parse."""
    ORIGIN_MISMATCH = "origin-mismatch"
    """A checkpoint names a different log (origin line)."""
    UNSIGNED_RECORDS = "unsigned-records"
    """More records after the last signed checkpoint than one crashed append can leave."""
    UNWITNESSED = "unwitnessed"
    """A witness cosignature was required but none covers the log's newest checkpoint."""


@dataclass(frozen=True)
class TamperFinding:
    """One piece of evidence of tampering."""

    kind: TamperKind
    record: int | None
    """0-based index of the first bad record, when it can be named."""
    message: str
    record_last: int | None = None
    """When only a range can be named: the last record index of that range."""

    def where(self) -> str:
        if self.record is None:
            return "log" if self.record_last is None else f"records up to {self.record_last}"
        if self.record_last is not None and self.record_last != self.record:
            return f"records {self.record}-{self.record_last}"
        return f"record {self.record}"

    def line(self) -> str:
        return f"{self.kind.value} at {self.where()}: {self.message}"


@dataclass(frozen=True)
class TornTail:
    """What a crashed writer can leave behind: never signed, so never trusted or shown as such."""

    unsigned_records: int
    """Complete record lines after the last signed checkpoint."""
    partial_line_bytes: int
    """Bytes of an incomplete last line in the log."""
    partial_checkpoint_bytes: int
    """Bytes of an incomplete last entry in the checkpoints file."""

    @property
    def records(self) -> bool:
        """Whether complete records outrun the checkpoints (not only a partial write)."""
        return self.unsigned_records > 0

    def line(self) -> str:
        parts = []
        if self.partial_line_bytes:
            parts.append(f"{self.partial_line_bytes} bytes of an incomplete last record line")
        if self.unsigned_records:
            parts.append(f"{self.unsigned_records} complete record(s) after the last signed "
                         "checkpoint")
        if self.partial_checkpoint_bytes:
            parts.append(f"{self.partial_checkpoint_bytes} bytes of an incomplete checkpoint")
        return ("torn tail (a writer stopped mid-append): " + "; ".join(parts)
                + " - not signed, ignored; the next append moves it to <LOG>.torn")


@dataclass(frozen=True)
class VerificationResult:
    """Outcome of verifying a log. ``findings[0]`` is the first bad record / main problem."""

    status: Literal["intact", "tampered"]
    size: int
    """Records covered by the newest valid signed checkpoint (the verified prefix)."""
    root: bytes | None
    origin: str | None
    checkpoints: int
    """Checkpoints whose signature verified."""
    findings: tuple[TamperFinding, ...] = ()
    torn_tail: TornTail | None = None
    warnings: tuple[str, ...] = ()
    key_ids: tuple[str, ...] = ()
    """Trusted keys that signed at least one checkpoint (``name+hash``)."""
    checkpoint_text: str | None = None
    """The newest validly signed checkpoint: keep it as the trusted checkpoint next time."""
    witnessed: tuple[str, ...] = ()
    """Witness cosignatures accepted, as ``key id@size``."""

    @property
    def ok(self) -> bool:
        return self.status == "intact"

    @property
    def unsigned_tail(self) -> bool:
        """Complete records after the newest signed checkpoint (never vouched for):
        ``audit verify`` fails on them unless ``--allow-unsigned-tail``."""
        return self.torn_tail is not None and self.torn_tail.unsigned_records > 0

    @property
    def first(self) -> TamperFinding | None:
        return self.findings[0] if self.findings else None

    def summary(self) -> str:
        if self.first is not None:
            unwitnessed = all(f.kind is TamperKind.UNWITNESSED for f in self.findings)
            return f"{'UNWITNESSED' if unwitnessed else 'TAMPERED'}: {self.first.line()}"
        witnessed = f", witnessed by {', '.join(self.witnessed)}" if self.witnessed else ""
        return (f"OK: {self.size} record(s) verified against {self.checkpoints} signed "
                f"checkpoint(s), origin {self.origin or '-'}, keys {', '.join(self.key_ids) or '-'}"
                f"{witnessed}")


@dataclass(frozen=True)
class AppendResult:
    """What one successful (durable) append returns."""

    index: int
    """0-based index of the (last) appended record."""
    leaf_hash: str
    """``sha256:<hex>`` RFC 6962 leaf hash of that record: SHA-256(0x00 || record bytes)."""
    checkpoint_text: str
    """The signed note (C2SP tlog-checkpoint) committing to the log after this append."""
    tree_size: int = 0
    origin: str = ""
    indices: tuple[int, ...] = field(default=())
    """All indices written by this append (a batch writes several)."""


class AuditRepairWarning(UserWarning):
    """A writer moved a crashed writer's unsigned tail to ``LOG.torn``."""


class StateWarning(UserWarning):
    """``LOG.state`` was missing or did not match: the head was rebuilt from the files."""


class FormatError(ValueError):
    """Internal: a byte string is not in the expected format. Never escapes the package:
    callers turn it into a :class:`TamperFinding` (log content) or an ``InputError`` (user file)."""
