"""File faults around the audit log: a writer refuses with one AuditError line naming the
file - never a fresh log over the old one, never records moved aside silently - and
`audit verify` fails where records outrun their signatures.

The scenarios are the ones a reliability review of this project reported (issue 10,
2026-12-01: 11 file-fault scenarios, run against the writer and `audit verify`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sandboxharness.audit import (
    AuditLog,
    AuditRepairWarning,
    Signer,
    TamperKind,
    get_verification_result,
    record_verdict,
)
from sandboxharness.audit._samples import sample_verdict
from sandboxharness.errors import AuditError, InputError

SIGNER = Signer("faults-test", Ed25519PrivateKey.generate())
KEYS = [SIGNER.public_key]
N = 12


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "audit.log"
    for i in range(N):
        record_verdict(sample_verdict(i), path, SIGNER)
    return path


def _side(log: Path, suffix: str) -> Path:
    return log.with_name(log.name + suffix)


def _files(log: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in log.parent.iterdir() if p.is_file()}


def _refuses(log: Path, match: str) -> AuditError:
    before = _files(log)
    with pytest.raises(AuditError, match=match) as info:
        record_verdict(sample_verdict(99), log, SIGNER)
    assert "\n" not in str(info.value)
    assert _files(log) == before, "a refused append changed a file"
    assert not _side(log, ".torn").exists(), "records were moved aside"
    return info.value


def test_checkpoints_deleted_append_refuses_and_verify_fails(log: Path) -> None:
    """Fault: LOG.checkpoints deleted. Before: the next append started a new log and moved
    the records to LOG.torn, and `audit verify` still passed (issue 10)."""
    _side(log, ".checkpoints").unlink()
    _refuses(log, "no audit.log.checkpoints")
    result = get_verification_result(log, KEYS)
    assert result.first is not None and result.first.kind == TamperKind.UNSIGNED_RECORDS


def test_checkpoints_emptied_append_refuses_and_verify_fails(log: Path) -> None:
    """Fault: LOG.checkpoints truncated to 0 bytes (LOG.state still names 12 signed
    records). Before: all 12 records were moved to LOG.torn, verify exit 0 (issue 10)."""
    _side(log, ".checkpoints").write_bytes(b"")
    _refuses(log, "checkpoints were removed")
    result = get_verification_result(log, KEYS)
    assert result.ok and result.unsigned_tail and result.size == 0  # CLI: exit 1


@pytest.mark.parametrize("state", ["deleted", "junk"])
def test_checkpoints_and_state_gone_append_refuses(log: Path, state: str) -> None:
    """Fault: checkpoints emptied and LOG.state deleted or damaged: nothing shows the
    records are an interrupted append, so they are not moved (issue 10)."""
    _side(log, ".checkpoints").write_bytes(b"")
    if state == "deleted":
        _side(log, ".state").unlink()
    else:
        _side(log, ".state").write_text("{not json")
    _refuses(log, "no valid audit.log.state")


def test_log_deleted_append_refuses(log: Path) -> None:
    """Fault: the log itself deleted, its checkpoints left: no fresh log over them."""
    log.unlink()
    with pytest.raises(AuditError, match="missing, but .*checkpoints exists"):
        record_verdict(sample_verdict(99), log, SIGNER)
    assert not log.exists()


def test_state_missing_with_intact_log_rebuilds_and_warns(log: Path) -> None:
    """LOG.state lost but the log matches its newest checkpoint: the writer re-hashes,
    verifies and goes on (a lost cache is not a reason to stop), and says so."""
    _side(log, ".state").unlink()
    with pytest.warns(UserWarning, match="state is missing"):
        record_verdict(sample_verdict(99), log, SIGNER)
    assert get_verification_result(log, KEYS).size == N + 1


def test_torn_tail_repair_is_reported(log: Path) -> None:
    """A partial last record (a crash mid-write) is repaired - and reported, with the bytes
    kept in LOG.torn."""
    line = log.read_bytes().splitlines(keepends=True)[0]
    with log.open("ab") as fh:
        fh.write(line[:80])
    with pytest.warns(AuditRepairWarning, match="moved to"):
        record_verdict(sample_verdict(99), log, SIGNER)
    kept = json.loads(_side(log, ".torn").read_text().splitlines()[0])
    assert kept["file"] == "audit.log" and kept["data_b64"]


@pytest.mark.parametrize("suffix", ["", ".checkpoints", ".state", ".torn"])
def test_symlink_at_a_log_path_is_refused(tmp_path: Path, suffix: str) -> None:
    """Attack: a (dangling) symlink planted at the log or a sidecar path, so the writer
    writes outside the log directory (CWE-59, link following; issue 10)."""
    log = tmp_path / "logdir" / "audit.log"
    log.parent.mkdir()
    record_verdict(sample_verdict(0), log, SIGNER)
    with log.open("ab") as fh:  # make the writer want LOG.torn too
        fh.write(log.read_bytes()[:50])
    outside = tmp_path / "outside" / "target"
    outside.parent.mkdir()
    link = _side(log, suffix)
    if link.exists():
        link.unlink()
    link.symlink_to(outside)
    with pytest.raises(AuditError, match="symbolic link") as info:
        record_verdict(sample_verdict(1), log, SIGNER)
    assert "\n" not in str(info.value)
    assert not outside.exists(), "the writer followed the symlink"


def test_verify_refuses_a_symlinked_log(log: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.log"
    link.symlink_to(log)
    with pytest.raises(InputError, match="symbolic link"):
        get_verification_result(link, KEYS)


_FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from sandboxharness.audit import Signer, record_verdict
    from sandboxharness.audit._samples import sample_verdict
    from sandboxharness.audit.keys import parse_private_key
    signer = parse_private_key(sys.argv[2], where="key")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        record_verdict(sample_verdict(99), Path(sys.argv[1]), signer)
    except Exception as exc:
        print(type(exc).__name__, exc, sep="|")
""")


@pytest.mark.parametrize("where", ["append", "repair"])
def test_full_disk_is_an_audit_error(log: Path, where: str) -> None:
    """Fault: the disk fills during an append or during torn-tail repair (RLIMIT_FSIZE in
    a subprocess: writes fail with EFBIG as on a full disk). Before: a raw OSError from
    the repair (issue 10)."""
    if where == "repair":
        with log.open("ab") as fh:
            fh.write(log.read_bytes()[:120])  # a torn tail: the next append repairs it
    before = log.read_bytes()
    limit = 60 if where == "repair" else log.stat().st_size + 100
    proc = subprocess.run([sys.executable, "-c", _FULL_DISK, str(log),
                           SIGNER.to_private_text(), str(limit)],
                          capture_output=True, text=True, timeout=60)
    kind, _, message = proc.stdout.strip().partition("|")
    assert kind == "AuditError", proc.stdout + proc.stderr
    assert "File too large" in message and str(log.parent) in message
    assert log.read_bytes() == before, "a failed append or repair left the log changed"
    assert get_verification_result(log, KEYS).size == N


def test_full_tmpfs_is_an_audit_error(tmp_path: Path) -> None:
    """Fault: a real full file system (a 64 KiB tmpfs): AuditError naming the file."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                       check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {exc}")
    try:
        log = mnt / "audit.log"
        with pytest.raises(AuditError, match="No space left") as info:
            for i in range(200):
                record_verdict(sample_verdict(i), log, SIGNER)
        assert str(mnt) in str(info.value) and "\n" not in str(info.value)
        result = get_verification_result(log, KEYS)
        assert result.ok and result.size == i, result.summary()
    finally:
        subprocess.run(["umount", str(mnt)], check=False, capture_output=True, timeout=30)


def test_log_replaced_while_waiting_is_refused(log: Path, tmp_path: Path) -> None:
    """Fault: the log file swapped for another (rename over it) between appends: the
    writer checks the file it locked is the one at the path."""
    copy = tmp_path / "copy"
    shutil.copy(log, copy)
    os.replace(copy, log)  # same bytes, a new inode
    record_verdict(sample_verdict(99), log, SIGNER)  # a fresh open: checked, fine
    assert get_verification_result(log, KEYS).size == N + 1


def test_append_many_batches_under_one_checkpoint_each(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    results = AuditLog(log).append_many([sample_verdict(i) for i in range(150)], SIGNER)
    assert [r.indices for r in results] == [tuple(range(0, 64)), tuple(range(64, 128)),
                                            tuple(range(128, 150))]
    result = get_verification_result(log, KEYS)
    assert result.ok and result.size == 150 and result.checkpoints == 3
