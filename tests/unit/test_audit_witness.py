"""Witnessed checkpoints: C2SP tlog-cosignature v1 (Ed25519) lines, a witness with
tlog-witness add-checkpoint semantics (https://c2sp.org/tlog-witness: refuse a rollback,
a split view, an inconsistent proof), and `verify --witness-key`, which catches
truncation and rollback without the reviewer keeping checkpoints by hand."""

from __future__ import annotations

import base64
import hashlib
import shutil
import struct
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from sandboxharness.audit import (
    Signer,
    TamperKind,
    WitnessRefused,
    get_verification_result,
    record_verdict,
    witness_log,
)
from sandboxharness.audit._samples import sample_verdict
from sandboxharness.audit.checkpoint import parse_signed_checkpoint, split_sidecar
from sandboxharness.audit.witness import (
    add_checkpoint,
    cosign,
    cosigner_of,
    parse_witness_key,
    request_body,
)
from sandboxharness.errors import AuditError, InputError

LOG_KEY = Signer("witness-test-log", Ed25519PrivateKey.generate())
WITNESS = Signer("witness.test-w1", Ed25519PrivateKey.generate())
KEYS = [LOG_KEY.public_key]
W = [cosigner_of(WITNESS)]


def _append(log: Path, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        record_verdict(sample_verdict(i), log, LOG_KEY)


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "audit.log"
    _append(log, 6)
    return log, tmp_path / "witness-state"


def _cut(log: Path, size: int) -> None:
    """Truncate the log and its checkpoints to ``size`` records (a consistent shorter log)."""
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:size]))
    cps = log.with_name(log.name + ".checkpoints")
    data = cps.read_bytes()
    cps.write_bytes(data[:split_sidecar(data).entries[size].offset])
    log.with_name(log.name + ".state").unlink()


def test_cosignature_line_is_c2sp_cosignature_v1(setup: tuple[Path, Path]) -> None:
    """The line checks with nothing but the spec and an Ed25519 library: key id =
    SHA-256(name || 0x0A || 0x04 || key)[:4], then u64 big-endian time, then the
    signature over "cosignature/v1\\ntime <t>\\n" + checkpoint body."""
    log, state = setup
    sc, cosigned = witness_log(log, KEYS, WITNESS, state, now=1_700_000_000)
    line = cosigned.splitlines()[-1]
    name, blob64 = line.removeprefix("\u2014 ").split(" ")
    blob = base64.b64decode(blob64)
    raw = WITNESS.public_key.raw
    assert name == WITNESS.name and len(blob) == 4 + 8 + 64
    assert blob[:4] == hashlib.sha256(name.encode() + b"\n\x04" + raw).digest()[:4]
    assert struct.unpack(">Q", blob[4:12])[0] == 1_700_000_000
    message = b"cosignature/v1\ntime 1700000000\n" + sc.note.text.encode()
    Ed25519PublicKey.from_public_bytes(raw).verify(blob[12:], message)  # raises if bad
    note = parse_signed_checkpoint(cosigned)
    assert len(note.note.signatures) == 2  # the log's signature and the cosignature


def test_witness_key_formats(tmp_path: Path) -> None:
    vkey = cosigner_of(WITNESS).vkey()
    assert base64.b64decode(vkey.split("+", 2)[2])[0] == 0x04  # C2SP cosignature/v1 vkey type
    assert parse_witness_key(vkey, where="k") == cosigner_of(WITNESS)
    assert parse_witness_key(WITNESS.public_key.to_vkey(), where="k") == cosigner_of(WITNESS)
    with pytest.raises(InputError):
        parse_witness_key(vkey[:-4] + "AAAA", where="k")


def test_witness_refuses_rollback(setup: tuple[Path, Path]) -> None:
    """Attack: after the witness cosigned size 9, restore an older copy of the log (size
    6) and ask again: refused (tlog-witness: never a smaller tree after a larger one)."""
    log, state = setup
    old = {p.name: p.read_bytes() for p in log.parent.glob("audit.log*") if p.is_file()}
    _append(log, 3, start=6)
    witness_log(log, KEYS, WITNESS, state)
    for name, data in old.items():
        (log.parent / name).write_bytes(data)
    with pytest.raises(WitnessRefused, match="rollback: .* offers size 6, but this witness "
                                             "already cosigned size 9"):
        witness_log(log, KEYS, WITNESS, state)


def test_witness_refuses_split_view(setup: tuple[Path, Path], tmp_path: Path) -> None:
    """Attack: a key holder rewrites records 3-5 and re-signs (same origin), then offers
    the witness that history after it cosigned the honest size 6: a split view."""
    log, state = setup
    witness_log(log, KEYS, WITNESS, state)
    _cut(log, 3)
    _append(log, 4, start=100)  # a different history, sizes 4-7, same key and origin
    with pytest.raises(WitnessRefused, match="split view"):
        witness_log(log, KEYS, WITNESS, state)
    _cut(log, 6)  # the same size, another root
    with pytest.raises(WitnessRefused, match="split view: two different roots for size 6"):
        witness_log(log, KEYS, WITNESS, state)


def test_witness_checks_requests_like_the_protocol(setup: tuple[Path, Path]) -> None:
    """add-checkpoint semantics: old size must match the witness's (409 conflict), the
    checkpoint must be signed by a configured log key (403), the proof must verify (422)."""
    log, state = setup
    sc, _ = witness_log(log, KEYS, WITNESS, state)
    _append(log, 2, start=6)
    newest = split_sidecar(log.with_name("audit.log.checkpoints").read_bytes()).entries[-1].text
    assert newest is not None
    with pytest.raises(WitnessRefused, match="conflict"):
        add_checkpoint(state, request_body(3, [], newest), KEYS, WITNESS, now=1)
    with pytest.raises(WitnessRefused, match="no signature by a trusted log key"):
        add_checkpoint(state, request_body(6, [], newest), [WITNESS.public_key], WITNESS, now=1)
    with pytest.raises(WitnessRefused, match="not consistent"):
        add_checkpoint(state, request_body(6, [bytes(32)] * 3, newest), KEYS, WITNESS, now=1)
    with pytest.raises(WitnessRefused, match="malformed"):
        add_checkpoint(state, b"old 06\n\n" + newest.encode(), KEYS, WITNESS, now=1)
    assert sc.checkpoint.size == 6


def test_witness_must_not_be_the_log_key(setup: tuple[Path, Path]) -> None:
    log, state = setup
    with pytest.raises(InputError, match="independent"):
        witness_log(log, KEYS, LOG_KEY, state)


def test_altered_witness_state_is_refused(setup: tuple[Path, Path]) -> None:
    """Attack: lower the witness's stored size so it accepts a rollback: its state must
    carry its own cosignature, or it refuses to go on."""
    log, state = setup
    witness_log(log, KEYS, WITNESS, state)
    stored = next(state.glob("*.cosigned"))
    stored.write_text(stored.read_text().replace("\n6\n", "\n5\n", 1))
    with pytest.raises(AuditError, match="not cosigned by this witness key"):
        witness_log(log, KEYS, WITNESS, state)


def test_verify_with_witness_key_catches_truncation(setup: tuple[Path, Path]) -> None:
    """Attack: cut the newest records *and* their checkpoints - a consistent shorter log
    that plain `audit verify` cannot tell from an honest one. With --witness-key the
    witnessed size 6 shows it; with LOG.witness deleted too, the witness's own state."""
    log, state = setup
    witness_log(log, KEYS, WITNESS, state)
    assert get_verification_result(log, KEYS, witness_keys=W).ok
    _cut(log, 4)
    assert get_verification_result(log, KEYS).ok  # the documented limit without a witness
    cut = get_verification_result(log, KEYS, witness_keys=W)
    assert cut.first is not None and (cut.first.kind, cut.first.record) == (
        TamperKind.ROLLBACK, 4), cut.first.line()
    log.with_name("audit.log.witness").unlink()
    gone = get_verification_result(log, KEYS, witness_keys=W)
    assert gone.first is not None and gone.first.kind == TamperKind.UNWITNESSED
    held = get_verification_result(log, KEYS, witness_keys=W, witness_state=state)
    assert held.first is not None and held.first.kind == TamperKind.ROLLBACK


def test_verify_with_witness_key_requires_coverage(setup: tuple[Path, Path]) -> None:
    """Records appended after the last witness run are not covered: verify says which,
    and passes again once the witness cosigned them."""
    log, state = setup
    witness_log(log, KEYS, WITNESS, state)
    _append(log, 2, start=6)
    late = get_verification_result(log, KEYS, witness_keys=W)
    assert late.first is not None and late.first.kind == TamperKind.UNWITNESSED
    assert (late.first.record, late.first.record_last) == (6, 7)
    assert late.summary().startswith("UNWITNESSED:")
    witness_log(log, KEYS, WITNESS, state)
    ok = get_verification_result(log, KEYS, witness_keys=W, witness_state=state)
    assert ok.ok and ok.witnessed == (f"{cosigner_of(WITNESS).key_id()}@8",)


def test_forged_cosignature_is_caught(setup: tuple[Path, Path]) -> None:
    """Attack: append a checkpoint with a made-up witness cosignature to LOG.witness."""
    log, state = setup
    sc, _ = witness_log(log, KEYS, WITNESS, state)
    other = Signer(WITNESS.name, Ed25519PrivateKey.generate())
    forged = cosign(sc.note.text, other, 1)
    # same name and key id as the real witness: a line claiming it, not verifying
    blob = base64.b64decode(forged.split(" ")[2])
    real_id = hashlib.sha256(WITNESS.name.encode() + b"\n\x04"
                             + WITNESS.public_key.raw).digest()[:4]
    line = f"\u2014 {WITNESS.name} {base64.b64encode(real_id + blob[4:]).decode()}\n"
    with log.with_name("audit.log.witness").open("a") as fh:
        fh.write(sc.text + line + "\n")
    result = get_verification_result(log, KEYS, witness_keys=W)
    assert result.first is not None and result.first.kind == TamperKind.BAD_SIGNATURE


def test_witness_state_copy_is_independent(setup: tuple[Path, Path], tmp_path: Path) -> None:
    """A second witness (own key, own state) cosigns independently."""
    log, state = setup
    second = Signer("witness.test-w2", Ed25519PrivateKey.generate())
    witness_log(log, KEYS, WITNESS, state)
    witness_log(log, KEYS, second, tmp_path / "w2")
    both = get_verification_result(log, KEYS, witness_keys=[*W, cosigner_of(second)])
    assert both.ok and len(both.witnessed) == 2
    shutil.rmtree(tmp_path / "w2")
