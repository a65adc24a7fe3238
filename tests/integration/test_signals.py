"""SIGTERM / SIGINT to a running ``sandboxharness evaluate``: the candidate's process tree is
killed, its job directory and cgroups removed, and the CLI exits 143 / 130 with one line.

Before: Python's default SIGTERM ended the harness at once, so no ``finally`` ran and the
``shx-job-*`` directory and the job's (empty) cgroups stayed behind (issue 10, found by a
reliability run: SIGTERM to a running evaluate). A real CLI process, a real sandbox.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandboxharness.sandbox import cgroups
from tests.conftest import REPO, make_solution

SLEEPER = "import time\n\ntime.sleep(3600)  # at import: the worker is busy with the candidate\n" \
          "\n\ndef run(x, w, y):\n    pass\n"


def _procs() -> dict[int, tuple[int, str]]:
    """Every host process: pid -> (parent pid, command line)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmd)
    return out


def _descendants(root: int) -> dict[int, str]:
    procs = _procs()
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, cmd) in procs.items():
            if ppid == parent and pid not in found:
                found[pid] = cmd
                frontier.append(pid)
    return found


def _job_cgroups_of(pid: int) -> set[Path]:
    """The job cgroup directories (``shx-<role>-<hex>``) a process is in."""
    names = {line.rsplit("/", 1)[-1] for line in Path(f"/proc/{pid}/cgroup").read_text()
             .splitlines() if line.rsplit("/", 1)[-1].startswith("shx-")}
    return {h.parent / n for h in cgroups.detect().by_controller.values() for n in names}


def _alive(pid: int, cmd: str) -> bool:
    try:
        now = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return False
    return now == cmd  # the same process, not a reused pid


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_to_evaluate_cleans_up(tmp_path: Path, tiny_def_path: Path, tiny_wl_path: Path,
                                      sig: signal.Signals) -> None:
    """A signal to evaluate while the candidate runs: exit 128+signal, one line, and no job
    directory, no sandboxed process and no job cgroup left."""
    sol = tmp_path / "sleeper.json"
    sol.write_text(json.dumps(make_solution(SLEEPER, language="python")))
    policy = tmp_path / "p.yaml"
    policy.write_text("name: signals\nimports: {deny: []}\n"
                      "static: {bandit: false, semgrep: false, ast_rules: false}\n"
                      "limits: {compile_timeout_s: 600, run_timeout_s: 600}\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sandboxharness.cli", "evaluate", "--definition", str(tiny_def_path),
         "--solution", str(sol), "--workloads", str(tiny_wl_path), "--policy", str(policy),
         "--backend", "process"], cwd=REPO, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        worker: dict[int, str] = {}
        while not worker:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.2)
            tree = _descendants(proc.pid)
            worker = {p: c for p, c in tree.items() if "sandboxharness.worker" in c}
        assert list(tmp.glob("shx-job-*")), "the job directory should exist while it runs"
        job_cgroups = set().union(*(_job_cgroups_of(p) for p in worker))
        assert job_cgroups or not cgroups.detect().by_controller
        time.sleep(0.5)  # let it import the candidate (which then sleeps)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: interrupted by {sig.name}"), stderr
    assert list(tmp.glob("shx-job-*")) == []
    assert [p for p, c in tree.items() if _alive(p, c)] == []
    assert [d for d in job_cgroups if d.exists()] == []
