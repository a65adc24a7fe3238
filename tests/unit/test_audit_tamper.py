"""One regression test per attack on the audit log: real verdicts, real Ed25519, real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandboxharness.audit import (
    AuditLog,
    LogTamperedError,
    Signer,
    TamperKind,
    get_verification_result,
    record_verdict,
    verify_log,
)
from sandboxharness.audit._samples import sample_verdict
from sandboxharness.audit.checkpoint import (
    Checkpoint,
    parse_signed_checkpoint,
    sign_checkpoint,
    split_sidecar,
)
from sandboxharness.audit.merkle import hash_leaf, root_hash
from sandboxharness.audit.verify import verify_snapshot
from sandboxharness.errors import AuditError, InputError

N = 12


def _signer(name: str = "audit-test") -> Signer:
    return Signer(name, Ed25519PrivateKey.generate())


SIGNER = _signer()
KEYS = [SIGNER.public_key]


def _build(path: Path, n: int = N, signer: Signer = SIGNER, start: int = 0) -> list[str]:
    """Append n real verdicts one by one; return the checkpoint after each append."""
    return [record_verdict(sample_verdict(start + i), path, signer).checkpoint_text
            for i in range(n)]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "audit.log"
    _build(path)
    return path


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _verify(path: Path, keys: list = KEYS, trusted: list | None = None):  # type: ignore[type-arg]
    return get_verification_result(path, keys, trusted or [])


def _first(path: Path, **kw: object) -> tuple[TamperKind, int | None]:
    result = _verify(path, **kw)  # type: ignore[arg-type]
    assert result.status == "tampered", result.summary()
    assert result.first is not None
    return result.first.kind, result.first.record


def test_intact_log_verifies(log: Path) -> None:
    result = verify_log(log, KEYS)
    assert result.ok and result.size == N and result.checkpoints == N
    assert result.key_ids == (SIGNER.key_id,) and result.torn_tail is None
    assert result.checkpoint_text and parse_signed_checkpoint(result.checkpoint_text)


def test_edit_one_byte_in_a_record(log: Path) -> None:
    """Attack: flip one digit of a verdict's seed in record 5 (still valid JSON)."""
    data = log.read_bytes()
    line5 = sum(len(x) for x in _lines(log)[:5])
    at = data.index(b'"seed":', line5) + 8
    log.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
    assert _first(log) == (TamperKind.EDITED, 5)
    with pytest.raises(LogTamperedError, match="edited-record at record 5"):
        verify_log(log, KEYS)


def test_delete_a_record(log: Path) -> None:
    """Attack: remove record 4 from the middle of the log."""
    lines = _lines(log)
    log.write_bytes(b"".join(lines[:4] + lines[5:]))
    assert _first(log) == (TamperKind.DELETED, 4)


def test_insert_a_forged_record(log: Path, tmp_path: Path) -> None:
    """Attack: splice in a well-formed record with the right index and prev (forged)."""
    lines = _lines(log)
    other = tmp_path / "other.log"
    _build(other, 7, _signer("attacker"))  # same shape, attacker's own chain
    forged = _lines(other)[6]
    log.write_bytes(b"".join(lines[:6] + [forged] + lines[6:]))
    kind, record = _first(log)
    assert kind in (TamperKind.INSERTED, TamperKind.EDITED) and record == 6


def test_insert_a_copy_of_a_record(log: Path) -> None:
    """Attack: duplicate an earlier (promote) record further down."""
    lines = _lines(log)
    log.write_bytes(b"".join(lines[:8] + [lines[2]] + lines[8:]))
    assert _first(log) == (TamperKind.INSERTED, 8)


def test_reorder_records(log: Path) -> None:
    """Attack: swap records 3 and 7."""
    lines = _lines(log)
    lines[3], lines[7] = lines[7], lines[3]
    log.write_bytes(b"".join(lines))
    assert _first(log) == (TamperKind.REORDERED, 3)


def test_truncate_tail(log: Path) -> None:
    """Attack: cut the last three records (checkpoints left alone)."""
    log.write_bytes(b"".join(_lines(log)[:-3]))
    assert _first(log) == (TamperKind.TRUNCATED, N - 3)


def test_truncate_tail_and_checkpoints_needs_trusted_checkpoint(tmp_path: Path) -> None:
    """Attack: cut records *and* their checkpoints - only a trusted checkpoint sees it."""
    log = tmp_path / "audit.log"
    checkpoints = _build(log)
    cps = log.with_name("audit.log.checkpoints")
    log.write_bytes(b"".join(_lines(log)[:9]))
    cps.write_text("".join(c + "\n" for c in checkpoints[:9]))
    assert _verify(log).ok  # the documented limit: a consistent shorter log
    assert _first(log, trusted=[checkpoints[-1]]) == (TamperKind.ROLLBACK, 9)


def test_rollback_to_an_old_copy(tmp_path: Path) -> None:
    """Attack: restore a backup of log + checkpoints from earlier (erases later verdicts)."""
    log = tmp_path / "audit.log"
    cps = log.with_name("audit.log.checkpoints")
    _build(log, 5)
    shutil.copy(log, tmp_path / "old.log")
    shutil.copy(cps, tmp_path / "old.cps")
    trusted = _build(log, 4, start=5)[-1]
    shutil.copy(tmp_path / "old.log", log)
    shutil.copy(tmp_path / "old.cps", cps)
    assert _first(log, trusted=[trusted]) == (TamperKind.ROLLBACK, 5)
    with pytest.raises(LogTamperedError, match="rollback"):
        verify_log(log, KEYS, [trusted])


def test_replayed_old_checkpoint(log: Path) -> None:
    """Attack: append an old (validly signed) checkpoint after newer ones."""
    cps = log.with_name("audit.log.checkpoints")
    third = split_sidecar(cps.read_bytes()).entries[2].text
    assert third is not None
    with cps.open("a") as fh:
        fh.write(third + "\n")
    assert _first(log) == (TamperKind.ROLLBACK, None)


def _fork(tmp_path: Path) -> tuple[Path, str]:
    """A key holder rewrites history from record 3 on and re-signs it."""
    honest = tmp_path / "honest.log"
    checkpoints = _build(honest, 6)
    forked = tmp_path / "forked.log"
    forked.write_bytes(b"".join(_lines(honest)[:3]))
    forked.with_name("forked.log.checkpoints").write_text(
        "".join(c + "\n" for c in checkpoints[:3]))
    _build(forked, 3, start=100)  # different verdicts, same key, same origin
    return forked, checkpoints[-1]


def test_fork_against_trusted_checkpoint(tmp_path: Path) -> None:
    """Attack: rewrite records 3-5 and re-sign with the real key; the security team holds
    the honest checkpoint of size 6."""
    forked, trusted = _fork(tmp_path)
    assert _verify(forked).ok  # internally consistent: only an outside anchor shows it
    kind, _ = _first(forked, trusted=[trusted])
    assert kind == TamperKind.FORK


def test_fork_inside_the_checkpoints_file(tmp_path: Path) -> None:
    """Attack: as above, but the old checkpoints stay in the file: two roots for size 4."""
    forked, _ = _fork(tmp_path)
    honest_cps = (tmp_path / "honest.log.checkpoints").read_text()
    cps = forked.with_name("forked.log.checkpoints")
    cps.write_text(honest_cps + cps.read_text().split("\n\n", 6)[-1])
    result = _verify(forked)
    assert not result.ok
    assert any(f.kind == TamperKind.FORK for f in result.findings)


def test_edited_checkpoint_signature(log: Path) -> None:
    """Attack: change the root hash inside a checkpoint (its signature no longer matches)."""
    cps = log.with_name("audit.log.checkpoints")
    text = cps.read_text()
    entry = text.split("\n")
    entry[2] = ("A" if entry[2][0] != "A" else "B") + entry[2][1:]
    cps.write_text("\n".join(entry))
    assert _first(log) == (TamperKind.BAD_SIGNATURE, None)


def test_checkpoint_signed_by_untrusted_key(log: Path, tmp_path: Path) -> None:
    """Attack: rewrite the whole log and sign it with the attacker's own key."""
    fake = tmp_path / "fake.log"
    _build(fake, N, _signer("audit-test"))  # same name, different key
    shutil.copy(fake, log)
    shutil.copy(fake.with_name("fake.log.checkpoints"), log.with_name("audit.log.checkpoints"))
    assert _first(log)[0] == TamperKind.UNTRUSTED_CHECKPOINT


def test_checkpoints_file_deleted(log: Path) -> None:
    """Attack: delete the signatures so nothing can be checked."""
    log.with_name("audit.log.checkpoints").unlink()
    assert _first(log) == (TamperKind.UNSIGNED_RECORDS, 0)


def test_origin_mismatch(log: Path, tmp_path: Path) -> None:
    """Attack: pass off another log's (validly signed) checkpoint as this log's."""
    other = tmp_path / "other.log"
    foreign = _build(other, 2)[-1]
    assert _first(log, trusted=[foreign])[0] == TamperKind.ORIGIN_MISMATCH


def test_inconsistent_summary_is_reported(tmp_path: Path) -> None:
    """Attack by a key holder: flip the top-level decision of the newest record (the one
    a quick `grep` reads) to "promote", leave the verdict, re-sign every checkpoint."""
    log = tmp_path / "audit.log"
    origin = parse_signed_checkpoint(_build(log, 3)[-1]).checkpoint.origin
    lines = log.read_bytes().split(b"\n")[:-1]
    assert b'"decision":"promote"' in lines[0] and b'"decision":"reject"' in lines[1]
    lines[2] = lines[2].replace(b'"decision":"promote"', b'"decision":"reject"', 1)
    log.write_bytes(b"".join(line + b"\n" for line in lines))
    leaves = [hash_leaf(line) for line in lines]
    log.with_name("audit.log.checkpoints").write_text("".join(
        sign_checkpoint(Checkpoint(origin, k, root_hash(leaves[:k])), SIGNER) + "\n"
        for k in range(1, 4)))
    assert _first(log) == (TamperKind.INCONSISTENT_RECORD, 2)


def test_key_rotation(tmp_path: Path) -> None:
    """New key signs new checkpoints; old ones still verify with the old public key."""
    log = tmp_path / "audit.log"
    old, new = _signer("audit-2024"), _signer("audit-2025")
    _build(log, 3, old)
    _build(log, 3, new, start=3)
    both = verify_log(log, [old.public_key, new.public_key])
    assert both.size == 6 and set(both.key_ids) == {old.key_id, new.key_id}
    only_new = _verify(log, keys=[new.public_key])
    assert only_new.first is not None
    assert only_new.first.kind == TamperKind.UNTRUSTED_CHECKPOINT
    assert "old public key" in only_new.first.message


def test_writer_never_launders_tampering(log: Path) -> None:
    """Attack: tamper, then wait for the next honest append to re-sign the tampered log.
    Without the head cache the writer re-hashes and refuses; with it, the new checkpoint is
    computed from the cached (signed) tree, so the tampering stays visible."""
    lines = _lines(log)
    lines[2], lines[3] = lines[3], lines[2]
    log.write_bytes(b"".join(lines))
    state = log.with_name("audit.log.state")
    cached = state.read_bytes()
    state.unlink()
    with pytest.raises(AuditError, match="do not match"):
        record_verdict(sample_verdict(99), log, SIGNER)
    state.write_bytes(cached)
    record_verdict(sample_verdict(99), log, SIGNER)
    assert _first(log) == (TamperKind.REORDERED, 2)
    log.write_bytes(b"".join(lines[:5]))
    with pytest.raises(AuditError, match="removed"):
        record_verdict(sample_verdict(99), log, SIGNER)


@pytest.mark.parametrize("field", ["stack", "last_leaf", "log_end", "size", "cp_end", "junk"])
def test_forged_head_cache_is_ignored(log: Path, field: str) -> None:
    """Attack: rewrite LOG.state so the writer continues from a forged tree or offset."""
    state = log.with_name("audit.log.state")
    data = json.loads(state.read_text())
    if field == "stack":
        data["stack"][0][1] = "ab" * 32
    elif field == "last_leaf":
        data["last_leaf"] = "cd" * 32
    elif field == "junk":
        data = ["not", "a", "state"]
    else:
        data[field] -= 1
    state.write_text(json.dumps(data))
    record_verdict(sample_verdict(99), log, SIGNER)
    assert verify_log(log, KEYS).size == N + 1


def test_writer_refuses_foreign_tail_and_missing_checkpoints(log: Path, tmp_path: Path) -> None:
    with log.open("ab") as fh:
        fh.write(b'{"not": "a record"}\n')
    with pytest.raises(AuditError, match="not an audit record"):
        record_verdict(sample_verdict(99), log, SIGNER)
    plain = tmp_path / "notes.txt"
    plain.write_text("someone's file\n")
    with pytest.raises(AuditError, match="no notes.txt.checkpoints"):
        record_verdict(sample_verdict(0), plain, SIGNER)
    assert plain.read_text() == "someone's file\n"


def test_missing_log_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        _verify(tmp_path / "nope.log")


def test_batch_append_is_one_checkpoint(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    result = AuditLog(log).append([sample_verdict(i) for i in range(5)], SIGNER)
    assert result.indices == (0, 1, 2, 3, 4) and result.tree_size == 5
    assert verify_log(log, KEYS).checkpoints == 1


class Snapshot(tuple):  # type: ignore[type-arg]
    def __repr__(self) -> str:  # keep hypothesis failure reports readable
        return "<log snapshot>"


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes, str]:
    log = tmp_path_factory.mktemp("snap") / "audit.log"
    last = _build(log, 6)[-1]
    return Snapshot((log.read_bytes(), log.with_name("audit.log.checkpoints").read_bytes(),
                     last))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.floats(0, 1, exclude_max=True), delta=st.integers(1, 255))
def test_any_byte_edit_in_the_log_names_its_record(snapshot: tuple[bytes, bytes, str],
                                                   where: float, delta: int) -> None:
    """Attack: change any one byte of the log; the first finding names that record."""
    data, cps, _ = snapshot
    at = int(where * len(data))
    edited = data[:at] + bytes([(data[at] + delta) % 256]) + data[at + 1:]
    result = verify_snapshot(edited, cps, KEYS)
    assert result.status == "tampered" and result.first is not None
    assert result.first.record == data.count(b"\n", 0, at), result.first.line()
    assert result.first.kind in (TamperKind.EDITED, TamperKind.TRUNCATED)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.floats(0, 1, exclude_max=True), delta=st.integers(1, 255))
def test_any_byte_edit_in_the_checkpoints_is_caught(snapshot: tuple[bytes, bytes, str],
                                                    where: float, delta: int) -> None:
    """Attack: change any one byte of the checkpoints file - including the last entry's
    newlines, which must not pass for a torn (crashed) write."""
    data, cps, last = snapshot
    at = int(where * len(cps))
    edited = cps[:at] + bytes([(cps[at] + delta) % 256]) + cps[at + 1:]
    assert verify_snapshot(data, edited, KEYS).status == "tampered"
    trusted = [parse_signed_checkpoint(last)]
    assert verify_snapshot(data, edited, KEYS, trusted).status == "tampered"


@pytest.mark.parametrize("back", [1, 2, 3])
def test_edits_at_the_very_end_of_the_checkpoints(snapshot: tuple[bytes, bytes, str],
                                                  back: int) -> None:
    """The bytes a crash could plausibly have cut are the riskiest: all edits caught."""
    data, cps, _ = snapshot
    at = len(cps) - back
    for value in range(256):
        if value == cps[at]:
            continue
        edited = cps[:at] + bytes([value]) + cps[at + 1:]
        assert verify_snapshot(data, edited, KEYS).status == "tampered", (back, value)


@pytest.mark.slow
def test_every_single_byte_edit_is_caught_exhaustively(tmp_path: Path) -> None:
    """Attack: every one-byte change (each position, several bit patterns) of a 3-record
    log and its checkpoints. Each one is reported, and log edits name the right record."""
    log = tmp_path / "audit.log"
    _build(log, 3)
    data, cps = log.read_bytes(), log.with_name("audit.log.checkpoints").read_bytes()
    for at in range(len(cps)):
        for delta in (1, 64, 255):
            edited = cps[:at] + bytes([(cps[at] + delta) % 256]) + cps[at + 1:]
            assert not verify_snapshot(data, edited, KEYS).ok, (at, delta)
    for at in range(len(data)):
        for delta in (1, 128):
            result = verify_snapshot(data[:at] + bytes([(data[at] + delta) % 256])
                                     + data[at + 1:], cps, KEYS)
            assert result.first is not None and result.first.record == data.count(b"\n", 0, at)
