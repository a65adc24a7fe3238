"""Writers killed with SIGKILL: the log verifies up to the last committed record, the torn
tail is reported as such, no acknowledged append is lost, and the next writer repairs.

Run as a script, this module is the writer:
``python THIS loop LOG KEY FIRST`` appends forever, printing each acknowledged index;
``python THIS killat LOG KEY CALL NBYTES`` appends once and SIGKILLs itself inside its
CALL-th file write after NBYTES bytes (deterministic fault injection at every step).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROUNDS = 8


def _loop(log: Path, key: Path, first: int) -> None:
    from sandboxharness.audit import load_signer, record_verdict
    from sandboxharness.audit._samples import sample_verdict

    signer = load_signer(key, allow_dev_key=False, dev_key_dir=log.parent)
    i = first
    while True:
        result = record_verdict(sample_verdict(i, name=f"v{i}"), log, signer)
        # one write per line: unbuffered stdout would otherwise split it at the kill
        sys.stdout.write(f"{result.index} {i}\n")
        sys.stdout.flush()
        i += 1


def _kill_at(log: Path, key: Path, call: int, nbytes: int) -> None:
    from sandboxharness.audit import load_signer, record_verdict, storage
    from sandboxharness.audit._samples import sample_verdict

    signer = load_signer(key, allow_dev_key=False, dev_key_dir=log.parent)
    real, calls = storage.write_all, [0]

    def dying_write(fd: int, data: bytes) -> None:
        calls[0] += 1
        if calls[0] == call:
            real(fd, data[:nbytes])
            os.kill(os.getpid(), signal.SIGKILL)
        real(fd, data)

    storage.write_all = dying_write  # type: ignore[assignment]
    record_verdict(sample_verdict(999, name="killed"), log, signer)


def _keys(tmp_path: Path) -> tuple[Path, list]:  # type: ignore[type-arg]
    from sandboxharness.audit import generate_keys, read_public_keys

    files = generate_keys(tmp_path / "keys", "crash-test")
    return files.private, read_public_keys([files.public])


@pytest.mark.slow
def test_sigkill_at_random_times(tmp_path: Path) -> None:
    """Kill a looping writer at random moments, several rounds; verify after each."""
    from sandboxharness.audit import get_verification_result
    from sandboxharness.audit.view import read_entries

    key, pubs = _keys(tmp_path)
    log = tmp_path / "audit.log"
    rng = random.Random(20250601)  # noqa: S311 - kill-time jitter, not cryptography
    acked: dict[int, int] = {}  # log index -> verdict number
    torn_seen = 0
    for round_no in range(ROUNDS):
        proc = subprocess.Popen([sys.executable, __file__, "loop", str(log), str(key),
                                 str(10_000 * round_no)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.8, 1.6))  # interpreter start-up, then appends
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, err
        complete = out[: out.rfind("\n") + 1]  # a line cut by the kill was never acknowledged
        for line in complete.splitlines():
            index, number = map(int, line.split())
            acked[index] = number
        result = get_verification_result(log, pubs)
        assert result.ok, result.summary()
        torn_seen += result.torn_tail is not None
        assert all(i < result.size for i in acked), "an acknowledged append was lost"
        entries, _ = read_entries(log)
        names = {e.index: e.field("candidate", "name") for e in entries if e.signed}
        assert all(names[i] == f"v{n}" for i, n in acked.items())
    assert len(acked) > ROUNDS  # the writer really ran between kills
    print(f"{len(acked)} acknowledged appends, {torn_seen}/{ROUNDS} kills left a torn tail")
    final = get_verification_result(log, pubs)
    assert final.ok and final.size >= len(acked)


# (call, nbytes): 1 = the record write, 2 = the checkpoint write; -1 = all of it
KILL_POINTS = [(1, 0), (1, 1), (1, 100), (1, -1), (2, 0), (2, 1), (2, 50), (2, 120), (2, -1)]


@pytest.mark.parametrize("call,nbytes", KILL_POINTS)
def test_sigkill_at_every_step(tmp_path: Path, call: int, nbytes: int) -> None:
    """A writer SIGKILLed inside each write of an append (before its fsync): what it
    leaves verifies (torn tail at most), and the next append repairs it."""
    from sandboxharness.audit import get_verification_result, load_signer, record_verdict
    from sandboxharness.audit._samples import sample_verdict

    key, pubs = _keys(tmp_path)
    log = tmp_path / "audit.log"
    signer = load_signer(key, allow_dev_key=False, dev_key_dir=tmp_path)
    for i in range(3):
        record_verdict(sample_verdict(i), log, signer)
    size = 10**9 if nbytes == -1 else nbytes
    proc = subprocess.run([sys.executable, __file__, "killat", str(log), str(key), str(call),
                           str(size)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    result = get_verification_result(log, pubs)
    assert result.ok, result.summary()
    committed_all = call == 2 and nbytes == -1  # checkpoint fully written: committed
    assert result.size == (4 if committed_all else 3)
    assert (result.torn_tail is None) == (committed_all or (call == 1 and nbytes == 0))
    if result.torn_tail is not None:
        assert "torn tail" in result.torn_tail.line()
    record_verdict(sample_verdict(7), log, signer)
    after = get_verification_result(log, pubs)
    assert after.ok and after.torn_tail is None and after.size == result.size + 1


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "loop":
        _loop(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
    else:
        _kill_at(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
