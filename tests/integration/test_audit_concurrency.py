"""Several real processes append to one log at once: nothing lost, the tree stays valid.

Run as a script, this module is the worker: ``python THIS LOG KEY WORKER COUNT START_AT``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

WORKERS = 6
PER_WORKER = 15


def _worker(log: Path, key: Path, worker: int, count: int, start_at: float) -> None:
    from sandboxharness.audit import load_signer, record_verdict
    from sandboxharness.audit._samples import sample_verdict

    signer = load_signer(key, allow_dev_key=False, dev_key_dir=log.parent)
    while time.time() < start_at:  # line up the workers to maximise contention
        time.sleep(0.001)
    for i in range(count):
        result = record_verdict(sample_verdict(i, author=f"worker-{worker}",
                                               name=f"w{worker}-v{i}"), log, signer)
        print(result.index, flush=True)


def test_parallel_appenders_lose_nothing(tmp_path: Path) -> None:
    """Attack surface: racing writers. flock serialises them; every acknowledged append
    is in the log exactly once, indices are dense, every commit signs a checkpoint (group
    commit lets concurrent appends share one, so there may be fewer than appends)."""
    from sandboxharness.audit import generate_keys, read_public_keys, verify_log
    from sandboxharness.audit.view import read_entries

    keys = generate_keys(tmp_path / "keys", "concurrency")
    log = tmp_path / "audit.log"
    start_at = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, __file__, str(log), str(keys.private), str(w),
                               str(PER_WORKER), str(start_at)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(WORKERS)]
    acked: list[int] = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        acked += [int(x) for x in out.split()]
    total = WORKERS * PER_WORKER
    assert sorted(acked) == list(range(total))
    result = verify_log(log, read_public_keys([keys.public]))
    assert result.size == total and 0 < result.checkpoints <= total and result.torn_tail is None
    entries, _ = read_entries(log)
    names = Counter(e.field("candidate", "name") for e in entries)
    assert len(names) == total and set(names.values()) == {1}
    by_worker = Counter(e.field("candidate", "author") for e in entries)
    assert by_worker == {f"worker-{w}": PER_WORKER for w in range(WORKERS)}
    # interleaved, not one worker after another: the lock was actually contended
    authors = [e.field("candidate", "author") for e in entries]
    assert sum(a != b for a, b in zip(authors, authors[1:], strict=False)) > WORKERS


if __name__ == "__main__":
    _worker(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
            float(sys.argv[5]))
