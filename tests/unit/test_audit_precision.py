"""The verifier names exactly the first record that does not verify, and the first
record where a fork diverges - also when checkpoints cover batches, not single records.

Before (issue 10, 2026-12-01 review): an inserted forged record was blamed on its
genuine neighbour, and a fork starting at record 20 was reported as "up to record 40".
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sandboxharness.audit import AuditLog, Signer, TamperKind, get_verification_result
from sandboxharness.audit._samples import sample_verdict
from sandboxharness.audit.checkpoint import split_sidecar
from sandboxharness.audit.merkle import hash_leaf
from sandboxharness.audit.records import assemble, prepare

SIGNER = Signer("precision-test", Ed25519PrivateKey.generate())
KEYS = [SIGNER.public_key]


def _build(path: Path, n: int, batch: int, start: int = 0) -> None:
    log = AuditLog(path)
    for i in range(start, start + n, batch):
        log.append([sample_verdict(k) for k in range(i, min(i + batch, start + n))], SIGNER)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("content", [True, False], ids=["full", "integrity-only"])
@pytest.mark.parametrize("batch", [1, 64])
@pytest.mark.parametrize("at", [0, 5, 17, 28])
def test_forged_insert_is_blamed_on_itself(tmp_path: Path, batch: int, at: int,
                                           content: bool) -> None:
    """Attack: splice in a well-formed forged record whose index and prev continue the
    chain correctly (it links to the genuine record before it); the genuine records after
    it keep their bytes. The first finding names the forged record, not a neighbour."""
    log = tmp_path / "audit.log"
    _build(log, 30, batch)
    lines = _lines(log)
    prev = hash_leaf(lines[at - 1].rstrip(b"\n")) if at else None
    forged = assemble(prepare(sample_verdict(1000, decision="promote")), index=at,
                      prev_leaf=prev, recorded_at=datetime.now(UTC))
    log.write_bytes(b"".join(lines[:at] + [forged + b"\n"] + lines[at:]))
    result = get_verification_result(log, KEYS, content=content)
    assert result.first is not None, result.summary()
    assert (result.first.kind, result.first.record) == (TamperKind.INSERTED, at), \
        result.first.line()


@pytest.mark.parametrize("content", [True, False], ids=["full", "integrity-only"])
@pytest.mark.parametrize("batch", [1, 64])
def test_edit_is_named_exactly_in_batched_logs(tmp_path: Path, batch: int,
                                               content: bool) -> None:
    """Attack: change one verdict byte of record 17 in a log whose checkpoints cover 64
    records each: the chain names record 17, not the batch's first record."""
    log = tmp_path / "audit.log"
    _build(log, 40, batch)
    lines = _lines(log)
    lines[17] = lines[17].replace(b'"duration_s":0.4', b'"duration_s":0.5', 1)
    log.write_bytes(b"".join(lines))
    result = get_verification_result(log, KEYS, content=content)
    assert result.first is not None
    assert (result.first.kind, result.first.record) == (TamperKind.EDITED, 17), \
        result.first.line()


def _forked(tmp_path: Path, at: int, n: int) -> tuple[Path, Path]:
    """An honest log of n records, and a copy rewritten from record ``at`` on by a holder
    of the signing key (same origin, re-signed per record)."""
    honest = tmp_path / "honest.log"
    _build(honest, n, 1)
    forked = tmp_path / "forked.log"
    forked.write_bytes(b"".join(_lines(honest)[:at]))
    cps = honest.with_name("honest.log.checkpoints").read_bytes()
    cut = split_sidecar(cps).entries[at].offset
    forked.with_name("forked.log.checkpoints").write_bytes(cps[:cut])
    _build(forked, n - at, 1, start=500)
    return honest, forked


def test_fork_in_the_checkpoints_names_the_first_diverging_record(tmp_path: Path) -> None:
    """Attack: a key holder rewrites history from record 20 of 40 and re-signs, and the
    honest checkpoints are still in the file (two validly signed roots for sizes 21-40)."""
    honest, forked = _forked(tmp_path, 20, 40)
    cps = forked.with_name("forked.log.checkpoints")
    own = cps.read_bytes()
    rewritten = own[split_sidecar(own).entries[20].offset:]  # the re-signed sizes 21-40
    cps.write_bytes(honest.with_name("honest.log.checkpoints").read_bytes() + rewritten)
    result = get_verification_result(forked, KEYS)
    forks = [f for f in result.findings if f.kind == TamperKind.FORK]
    assert forks and (forks[0].record, forks[0].record_last) == (20, 20), forks[0].line()
    assert "diverges at record 20" in forks[0].message


def test_fork_against_trusted_checkpoints_is_bounded_by_them(tmp_path: Path) -> None:
    """Attack: as above, the honest checkpoints gone; the reviewer holds two honest ones
    (sizes 10 and 30). The fork lies between them: records 10-29, not "up to 29"."""
    honest, forked = _forked(tmp_path, 20, 40)
    entries = split_sidecar(honest.with_name("honest.log.checkpoints").read_bytes()).entries
    trusted = [entries[9].text, entries[29].text]
    result = get_verification_result(forked, KEYS, [t for t in trusted if t])
    assert result.first is not None and result.first.kind == TamperKind.FORK
    assert (result.first.record, result.first.record_last) == (10, 29), result.first.line()


def test_integrity_only_skips_content_but_not_integrity(tmp_path: Path) -> None:
    """What --integrity-only gives up: a key holder's record whose summary disagrees with
    its verdict, re-signed, passes it (the full check names it); anything the signatures
    cover still fails it."""
    from sandboxharness.audit.checkpoint import Checkpoint, parse_signed_checkpoint, sign_checkpoint
    from sandboxharness.audit.merkle import root_hash

    log = tmp_path / "audit.log"
    _build(log, 3, 1)
    cps = log.with_name("audit.log.checkpoints")
    origin = parse_signed_checkpoint(split_sidecar(cps.read_bytes()).entries[0].text or ""
                                     ).checkpoint.origin
    lines = log.read_bytes().split(b"\n")[:-1]
    lines[2] = lines[2].replace(b'"decision":"promote"', b'"decision":"reject"', 1)
    log.write_bytes(b"".join(line + b"\n" for line in lines))
    leaves = [hash_leaf(line) for line in lines]
    cps.write_text("".join(sign_checkpoint(Checkpoint(origin, k, root_hash(leaves[:k])),
                                           SIGNER) + "\n" for k in range(1, 4)))
    full = get_verification_result(log, KEYS)
    assert full.first is not None and full.first.kind == TamperKind.INCONSISTENT_RECORD
    assert get_verification_result(log, KEYS, content=False).ok
    log.write_bytes(log.read_bytes().replace(b'"seed":17', b'"seed":18', 1))
    edited = get_verification_result(log, KEYS, content=False)
    assert edited.first is not None and edited.first.record == 0
