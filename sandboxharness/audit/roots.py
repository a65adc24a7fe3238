"""From what the scan saw to findings: signed roots against the log's, forks (with the
first diverging record when the checkpoints pin it), truncation, rollback, unsigned
and unwitnessed records - and the :class:`VerificationResult`.

A fork's position: the first size s at which two validly signed roots disagree, and g,
the largest size below s whose root every signature agrees on. Records 0..g-1 are
shared, so history diverges at record g if g == s - 1, else somewhere in g..s-1. For a
fork against a trusted or witnessed checkpoint only those anchor g (the log's own
checkpoints were re-signed along with the records).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .analysis import span
from .checkpoint import SignedCheckpoint
from .cpscan import Anomaly, Checkpoints
from .interface import AuditLimits, TamperFinding, TamperKind, TornTail, VerificationResult
from .records import is_torn_record
from .scan import LogScan

_T = TamperKind
_PRECISE = {_T.INSERTED, _T.DELETED, _T.REORDERED, _T.EDITED}


@dataclass
class Anchors:
    """Checkpoints from outside the log: trusted (given by the caller) and witnessed."""

    trusted: list[tuple[str, SignedCheckpoint]] = field(default_factory=list)
    witnessed: list[tuple[str, SignedCheckpoint, bool, tuple[str, ...]]] = field(
        default_factory=list)
    """(label, checkpoint, from the witness's own state directory, witness key ids)."""
    required: bool = False
    """A witness cosignature must cover the log."""
    extra: list[TamperFinding] = field(default_factory=list)

    def all(self) -> list[tuple[str, SignedCheckpoint]]:
        return self.trusted + [(w[0], w[1]) for w in self.witnessed]

    def sizes(self) -> set[int]:
        return {sc.checkpoint.size for _, sc in self.all()}

    def choose_origin(self, cps: Checkpoints) -> tuple[str | None, list[TamperFinding]]:
        """The log's identity - what most of its signed checkpoints say, else the first
        anchor's - and a finding for each checkpoint or anchor of another log."""
        common = [o for o, _ in cps.counts.most_common(1) if o < len(cps.origins)]
        first = [sc for _, sc in self.all()][:1]
        origin = (cps.origins[common[0]] if common else
                  first[0].checkpoint.origin if first else None)
        findings = []
        for oid, other in enumerate(cps.origins):
            if other != origin:
                for _, (j, offset, size, _) in zip(range(16), cps.rows_for(oid), strict=False):
                    findings.append(TamperFinding(_T.ORIGIN_MISMATCH, None, f"checkpoint #{j} (byte "
                                            f"{offset} of the checkpoints file) for size "
                                            f"{size} is for log {other}, not {origin}"))
        for label, sc in self.trusted + [(w[0], w[1]) for w in self.witnessed if not w[2]]:
            if sc.checkpoint.origin != origin:
                findings.append(TamperFinding(_T.ORIGIN_MISMATCH, None, f"{label} is for log "
                                        f"{sc.checkpoint.origin}, not {origin}"))
        self.trusted = [(lbl, sc) for lbl, sc in self.trusted if sc.checkpoint.origin == origin]
        self.witnessed = [w for w in self.witnessed if w[1].checkpoint.origin == origin]
        return origin, findings + self.extra


def _diverge(g: int, size: int) -> str:
    return (f"history diverges at record {g}" if g == size - 1 else
            f"history diverges somewhere in records {g}-{size - 1}")


def root_findings(scan: LogScan, anomalies: Sequence[Anomaly], anchors: Anchors,
                  committed: int, found: Sequence[TamperFinding]) -> list[TamperFinding]:
    r, n, out = scan.roots, scan.n, []
    own: dict[int, set[bytes]] = {s: set(v) for s, v in r.in_order_at.items()}
    for a in anomalies:
        own.setdefault(a.size, set()).add(a.root)
    first_bad, conflict = r.first_bad, r.conflict
    for a in sorted(anomalies, key=lambda a: a.size):
        if a.size > n:
            continue
        g = r.match_below.get(a.size, 0)
        if len(own[a.size]) > 1 and (conflict is None or a.size < conflict[0]):
            conflict = (a.size, a.label, g)
        if a.root != r.captured[a.size] and (first_bad is None or a.size < first_bad[0]):
            first_bad = (a.size, a.label, g)
    if conflict is not None:
        s, labels, g = conflict
        out.append(TamperFinding(_T.FORK, g, f"validly signed checkpoints disagree about tree size {s} "
                           f"({labels}): {_diverge(g, s)} and was re-signed (signing key "
                           "misused?)", record_last=s - 1))
    if first_bad is not None:
        s, label, g = first_bad
        if not any(f.kind in _PRECISE and f.record is not None and g <= f.record < s
                   for f in found):  # a precise finding already names the record
            out.append(TamperFinding(_T.EDITED, g, f"{span(g, max(g, s - 1))} differs from what was "
                               f"signed (root mismatch at tree size {s}, {label})",
                               record_last=max(g, s - 1)))
    out += _anchor_findings(scan, anchors, own, committed)
    return out


def _anchor_findings(scan: LogScan, anchors: Anchors, own: dict[int, set[bytes]],
                     committed: int) -> list[TamperFinding]:
    r, n, out = scan.roots, scan.n, []
    items = anchors.all()
    for label, sc in items:
        size, root = sc.checkpoint.size, sc.checkpoint.root
        if size > committed and committed <= n:
            out.append(TamperFinding(_T.ROLLBACK, min(committed, n),
                               f"{label} has size {size} but the newest signed checkpoint in "
                               f"the log has size {committed}: the log was rolled back or its "
                               "tail removed", record_last=size - 1))
        elif 0 < size <= n and r.captured.get(size) not in (None, root):
            if own.get(size, set()) <= {r.captured[size]}:  # the log's own agree: re-signed
                g = max((t.checkpoint.size for _, t in items if t.checkpoint.size < size
                         and r.captured.get(t.checkpoint.size) == t.checkpoint.root), default=0)
                out.append(TamperFinding(_T.FORK, g, f"the log's tree of size {size} is not the one "
                                   f"{label} signed: {_diverge(g, size)} and was re-signed",
                                   record_last=size - 1))
            else:
                out.append(TamperFinding(_T.FORK, None, f"{label} and the log's own checkpoints "
                                   f"disagree about tree size {size}", record_last=size - 1))
    if anchors.required:
        witnessed = [w[1].checkpoint.size for w in anchors.witnessed]
        if not witnessed:
            out.append(TamperFinding(_T.UNWITNESSED, None, "no checkpoint of this log carries a valid "
                               "cosignature by the witness key (LOG.witness missing or "
                               "emptied?): truncation and rollback cannot be ruled out"))
        elif max(witnessed) < min(committed, n):
            w = max(witnessed)
            out.append(TamperFinding(_T.UNWITNESSED, w, f"{span(w, committed - 1)} are not covered by "
                               f"a witness cosignature (newest witnessed size {w}; run "
                               "`audit witness`)", record_last=committed - 1))
    return out


def tail_findings(scan: LogScan, committed: int, cp_missing: bool,
                  limits: AuditLimits) -> list[TamperFinding]:
    n, out = scan.n, []
    head, partial = scan.partial()
    if cp_missing and (n or partial):
        out.append(TamperFinding(_T.UNSIGNED_RECORDS, 0, "the checkpoints file is missing: no "
                           "record is signed (a writer creates it before any record)"))
    if partial and (partial > limits.max_record_bytes or not is_torn_record(head)):
        out.append(TamperFinding(_T.EDITED, n, f"the {partial} bytes after record {n - 1} are "
                           "not the start of a record: appended by something else"))
    if committed > n:
        out.append(TamperFinding(_T.TRUNCATED, n, f"the log ends after {n} complete records but "
                           f"a signed checkpoint covers {committed}: "
                           f"{span(n, committed - 1)} removed", record_last=committed - 1))
    unsigned = max(n - committed, 0)
    if unsigned > limits.max_batch:
        out.append(TamperFinding(_T.UNSIGNED_RECORDS, committed,
                           f"{unsigned} records after the newest signed checkpoint (size "
                           f"{committed}): more than one crashed append can leave",
                           record_last=n - 1))
    return out


def summarize(scan: LogScan, cps: Checkpoints, oid: int, origin: str | None, committed: int,
              *, findings: tuple[TamperFinding, ...], anchors: Anchors) -> VerificationResult:
    n = scan.n
    partial = scan.partial()[1]
    unsigned = max(n - committed, 0)
    torn = (TornTail(unsigned, partial, cps.torn_bytes)
            if (unsigned or partial or cps.torn_bytes) else None)
    warnings = list(scan.drift)
    if any("DEVELOPMENT-KEY-NOT-FOR-AUDIT" in k for k in cps.key_ids):
        warnings.append("checkpoints are signed with a DEVELOPMENT key: not valid for audit")
    if n == 0 and not cps.counts.get(oid) and not anchors.all():
        warnings.append("the log is empty")
    if scan.more or cps.more_findings:
        warnings.append(f"{scan.more + cps.more_findings} further findings were not kept")
    newest = cps.newest.get(oid)
    best: dict[str, int] = {}
    for _, sc, _, ids in anchors.witnessed:
        for key in ids:
            best[key] = max(best.get(key, 0), sc.checkpoint.size)
    return VerificationResult(
        status="tampered" if findings else "intact", size=min(committed, n),
        root=scan.roots.captured.get(committed), origin=origin,
        checkpoints=cps.counts.get(oid, 0), findings=findings, torn_tail=torn,
        warnings=tuple(warnings), key_ids=tuple(cps.key_ids),
        checkpoint_text=newest[1] if newest else None,
        witnessed=tuple(f"{k}@{s}" for k, s in best.items()))
