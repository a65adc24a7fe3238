"""Group commit and locking with real processes and threads: writers exclude each other
through a lock on the log file itself (deleting any file next to it changes nothing),
share commits, and trust another process's queued batch only when it is authentic and
its writer still waits.

Run as a script, this module is a writer: ``python THIS LOG KEYTEXT WORKER COUNT START``.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sandboxharness.audit import Signer, get_verification_result, record_verdict
from sandboxharness.audit._samples import sample_verdict
from sandboxharness.audit.records import prepare
from sandboxharness.audit.spool import Spool
from sandboxharness.audit.storage import LogDir
from sandboxharness.audit.view import read_entries

SIGNER = Signer("group-commit-test", Ed25519PrivateKey.generate())
KEYS = [SIGNER.public_key]
WRITERS, EACH = 8, 12


def _writer(log: Path, key: str, worker: int, count: int, start_at: float) -> None:
    from sandboxharness.audit.keys import parse_private_key

    signer = parse_private_key(key, where="key")
    while time.time() < start_at:
        time.sleep(0.001)
    for i in range(count):
        result = record_verdict(sample_verdict(i, author=f"w{worker}", name=f"w{worker}-{i}"),
                                log, signer)
        print(result.index, flush=True)


def test_deleting_the_lock_file_during_writers_changes_nothing(tmp_path: Path) -> None:
    """Fault: LOG.lock (the old lock file) and LOG.state deleted again and again while 8
    writer processes append. Before: writers stopped excluding each other, one
    acknowledged record was lost and the log forked (issue 10). The lock is now the log
    file's own flock: every acknowledged index is there once, and the log verifies."""
    log = tmp_path / "audit.log"
    record_verdict(sample_verdict(0, name="first"), log, SIGNER)
    start_at = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, __file__, str(log), SIGNER.to_private_text(),
                               str(w), str(EACH), str(start_at)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for w in range(WRITERS)]
    stop = threading.Event()

    def saboteur() -> None:
        while not stop.is_set():
            for name in ("audit.log.lock", "audit.log.state"):
                (tmp_path / name).unlink(missing_ok=True)
            (tmp_path / "audit.log.lock").touch()
            time.sleep(0.002)

    thread = threading.Thread(target=saboteur)
    thread.start()
    acked: list[int] = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            acked += [int(x) for x in out.split()]
    finally:
        stop.set()
        thread.join()
    total = 1 + WRITERS * EACH
    assert sorted(acked) == list(range(1, total)), "an acknowledged append is missing or twice"
    result = get_verification_result(log, KEYS)
    assert result.ok and result.size == total and result.torn_tail is None, result.summary()
    names = Counter(e.field("candidate", "name") for e in read_entries(log)[0])
    assert len(names) == total and set(names.values()) == {1}


def test_threads_share_commits(tmp_path: Path) -> None:
    """8 threads of one process appending at once: every append durable and acknowledged
    once, and they share checkpoints (group commit), so there are fewer than appends."""
    log = tmp_path / "audit.log"
    record_verdict(sample_verdict(0), log, SIGNER)
    acked: list[int] = []
    lock = threading.Lock()

    def run(t: int) -> None:
        for i in range(EACH):
            r = record_verdict(sample_verdict(i, name=f"t{t}-{i}"), log, SIGNER)
            with lock:
                acked.append(r.index)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = 1 + WRITERS * EACH
    assert sorted(acked) == list(range(1, total))
    result = get_verification_result(log, KEYS)
    assert result.ok and result.size == total
    assert result.checkpoints < total, "no two appends shared a commit"


def test_spool_writes_only_live_authentic_batches(tmp_path: Path) -> None:
    """Attack: plant batches in LOG.spool for the signer to write - a forged one (no valid
    HMAC) whose planter waits on it, and a replayed copy of a real one nobody waits on.
    Neither is written; the live, authentic batch of a waiting writer is, and answered."""
    log = tmp_path / "audit.log"
    record_verdict(sample_verdict(0), log, SIGNER)
    d = LogDir(tmp_path)
    spool = Spool(d, log.name)
    real = spool.submit([[prepare(sample_verdict(1, name="queued"))]], SIGNER)
    spool_dir = tmp_path / "audit.log.spool"
    data = (spool_dir / real.name).read_bytes()
    (spool_dir / "1-replayed.req").write_bytes(data)  # a copy: nobody holds it
    forged = spool_dir / "2-forged.req"
    forged.write_bytes(b"0" * 64 + data[64:].replace(b'"queued"', b'"forged"'))
    held = os.open(forged, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_SH)  # the planter "waits" for it
    try:
        record_verdict(sample_verdict(2, name="leader"), log, SIGNER)
        done = spool.take(real, SIGNER, 1)
    finally:
        os.close(held)
        d.close()
    assert done is not None and done[0].indices == (2,)  # written by the leader, after it
    names = [e.field("candidate", "name") for e in read_entries(log)[0]]
    assert names[1:] == ["leader", "queued"]
    assert not (spool_dir / "1-replayed.req").exists()
    assert get_verification_result(log, KEYS).ok


def test_crash_in_the_first_append_is_repaired(tmp_path: Path) -> None:
    """A writer SIGKILLed after writing the very first records, before their checkpoint:
    LOG.state (written before any record) shows they are an interrupted append."""
    from tests.integration.test_audit_crash import __file__ as crash_script

    keys = tmp_path / "keys"
    from sandboxharness.audit import generate_keys

    files = generate_keys(keys, "first-crash")
    log = tmp_path / "audit.log"
    proc = subprocess.run([sys.executable, crash_script, "killat", str(log), str(files.private),
                           "1", str(10**9)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert proc.returncode == -9, proc.stderr
    assert log.read_bytes() and not log.with_name("audit.log.checkpoints").read_bytes()
    from sandboxharness.audit import load_signer, read_public_keys

    signer = load_signer(files.private, allow_dev_key=False, dev_key_dir=tmp_path)
    record_verdict(sample_verdict(1), log, signer)
    result = get_verification_result(log, read_public_keys([files.public]))
    assert result.ok and result.size == 1 and result.torn_tail is None


def test_parallel_verification_agrees_with_inline(tmp_path: Path) -> None:
    """The worker-process path finds exactly what the in-process path finds."""
    log = tmp_path / "audit.log"
    for i in range(40):
        record_verdict(sample_verdict(i), log, SIGNER)
    lines = log.read_bytes().splitlines(keepends=True)
    lines[7] = lines[7].replace(b'"decision":"reject"', b'"decision":"promote"', 1)
    del lines[20]
    log.write_bytes(b"".join(lines))
    inline = get_verification_result(log, KEYS, workers=0)
    parallel = get_verification_result(log, KEYS, workers=2)
    assert inline.findings and inline.findings == parallel.findings
    assert (inline.size, inline.root, inline.warnings) == (parallel.size, parallel.root,
                                                           parallel.warnings)


if __name__ == "__main__":
    _writer(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
            float(sys.argv[5]))
