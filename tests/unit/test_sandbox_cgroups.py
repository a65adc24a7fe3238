"""Per-job cgroups, for real: limits written, OOM kills and pids refusals counted, removal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandboxharness.sandbox import cgroups

SUPPORT = cgroups.detect()
needs = pytest.mark.skipif(
    not {"memory", "pids"} <= set(SUPPORT.by_controller),
    reason=f"no usable memory+pids cgroups here: {SUPPORT.notes}")


def _run_in(job: cgroups.JobCgroup, code: str) -> subprocess.CompletedProcess[str]:
    procs = job.procs_files

    def join() -> None:
        for path in procs:
            Path(path).write_text(str(os.getpid()))

    return subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True,
                          text=True, timeout=60, preexec_fn=join)  # noqa: PLW1509


@needs
def test_limits_are_written_and_the_cgroup_removed() -> None:
    job = cgroups.create("unit", 96, 12)
    try:
        for ctrl, (version, d) in job.dirs.items():
            assert d.is_dir() and d.name.startswith("shx-unit-")
            if ctrl == "pids":
                assert (d / "pids.max").read_text().strip() == "12"
            elif version == 1:
                assert int((d / "memory.limit_in_bytes").read_text()) == 96 * 1024 * 1024
            else:
                assert int((d / "memory.max").read_text()) == 96 * 1024 * 1024
    finally:
        job.remove()
    assert not any(d.exists() for _, d in job.dirs.values())


@needs
def test_oom_kill_is_counted() -> None:
    job = cgroups.create("unit", 64, 32)
    try:
        cp = _run_in(job, "x = [bytearray(16 << 20) for _ in range(64)]")
        assert cp.returncode == -9
        assert job.oom_kills() >= 1
        assert job.wait_empty(5)
    finally:
        job.remove()


@needs
def test_pids_refusal_is_counted_and_kill_all_empties() -> None:
    job = cgroups.create("unit", 512, 6)
    try:
        cp = _run_in(job, "import os, time\n"
                          "for _ in range(50):\n"
                          "    if os.fork() == 0:\n"
                          "        os.closerange(0, 3)\n"
                          "        time.sleep(60)\n")
        assert "BlockingIOError" in cp.stderr
        assert job.pids_refusals() >= 1
        job.kill_all()
        assert job.wait_empty(5)
    finally:
        job.remove()


def test_detect_explains_what_is_missing() -> None:
    for ctrl in cgroups.CONTROLLERS:
        assert ctrl in SUPPORT.by_controller or any(ctrl in n for n in SUPPORT.notes)
