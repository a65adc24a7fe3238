"""``run --local DS --ray ADDRESS``: a real two-node Ray cluster (CPU only) on this machine.

The same dataset and seed run on the cluster and locally must give the same decisions,
reason codes and trace statuses, with every trace written once, by the driver."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.test_run_local import GOOD, POLICY, SHELL, WRONG, _dataset

pytestmark = pytest.mark.slow

try:
    import ray  # noqa: F401  (only whether it imports)
except ImportError:
    pytest.skip("ray is not installed (the 'ray' extra)", allow_module_level=True)

RAY = Path(sys.executable).with_name("ray")


def _free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _node_ports() -> list[str]:
    """Every port a node listens on, chosen free: two nodes share this host."""
    names = ["--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
             "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port"]
    return [a for name, port in zip(names, _free_ports(len(names)), strict=True)
            for a in (name, str(port))]


def _ray(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(RAY), *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=REPO)


def _ours(temp: Path) -> list[int]:
    """Pids of processes whose command line names this cluster's temp dir."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if str(temp).encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
    return pids


@contextlib.contextmanager
def _cluster() -> Iterator[tuple[str, Path, dict[str, str]]]:
    """A head (2 CPUs) and one more node (1 CPU) on localhost, each with its own ports; on exit
    ``ray stop --force``, then every process of this cluster must be gone."""
    # short: Ray's unix socket paths live under it and are limited to 107 bytes
    temp = Path(tempfile.mkdtemp(prefix="shxray", dir="/tmp"))
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    (port,) = _free_ports(1)
    address = f"127.0.0.1:{port}"
    try:
        head = _ray("start", "--head", "--port", str(port), "--num-cpus", "2", "--num-gpus", "0",
                    "--disable-usage-stats", "--include-dashboard", "false",
                    "--temp-dir", str(temp), *_node_ports(), env=env)
        assert head.returncode == 0, head.stdout + head.stderr
        worker = _ray("start", "--address", address, "--num-cpus", "1", "--num-gpus", "0",
                      "--disable-usage-stats", "--temp-dir", str(temp), *_node_ports(), env=env)
        assert worker.returncode == 0, worker.stdout + worker.stderr
        yield address, temp, env
    finally:
        _ray("stop", "--force", env=env)
        deadline = time.monotonic() + 30
        while _ours(temp) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = _ours(temp)
        shutil.rmtree(temp, ignore_errors=True)
    assert not left, f"ray processes left behind: {left}"


@pytest.fixture
def cluster() -> Iterator[tuple[str, Path, dict[str, str]]]:
    with _cluster() as c:
        yield c


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sandboxharness.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env=env)


def _traces(root: Path) -> list[dict[str, object]]:
    lines = (root / "traces" / "rmsnorm" / "rms_t.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_ray_run_matches_local_run(tmp_path: Path, cluster: tuple[str, Path, dict[str, str]]
                                   ) -> None:
    address, temp, env = cluster
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    on_ray = _dataset(tmp_path / "ray", {"good": GOOD, "wrong": WRONG, "shell": SHELL})
    local = tmp_path / "local"
    shutil.copytree(on_ray, local)
    common = ("--policy", str(policy), "--backend", "process", "--seed", "11", "--json")
    log = tmp_path / "ray-events.jsonl"
    res = _cli("run", "--local", str(on_ray), "--ray", address, "--log-file", str(log), *common,
               env=env)
    assert res.returncode == 0, res.stderr
    ref = _cli("run", "--local", str(local), *common, env=env)
    assert ref.returncode == 0, ref.stderr

    def decisions(out: str) -> dict[str, tuple[str, list[str], int]]:
        summary = json.loads(out)
        assert summary["seed"] == 11
        return {c["solution"]: (c["decision"], c["reasons"], c["traces"])
                for c in summary["candidates"]}

    got, want = decisions(res.stdout), decisions(ref.stdout)
    assert got == want
    assert got["good"][0] == "promote" and got["wrong"][0] == "reject"
    assert "INCORRECT_NUMERICAL" in got["wrong"][1] and got["shell"][0] == "reject"

    def statuses(root: Path) -> dict[tuple[str, str], str]:
        seen: dict[tuple[str, str], str] = {}
        for t in _traces(root):
            key = (str(t["solution"]), str(t["workload"]["uuid"]))  # type: ignore[index]
            assert key not in seen, f"trace written twice: {key}"
            seen[key] = t["evaluation"]["status"]  # type: ignore[index]
        return seen

    assert statuses(on_ray) == statuses(local)
    assert len(_traces(on_ray)) == 6  # three solutions, two workloads each, once each
    # stage events stay in the Ray workers: the driver saw starts and ends only, which is
    # how this run is known to have been evaluated on the cluster and not in the driver
    events = [json.loads(x) for x in log.read_text().splitlines()]
    assert sorted(e["solution"] for e in events if e["event"] == "candidate.end") == \
        ["good", "shell", "wrong"]
    assert not [e for e in events if e["event"].startswith("stage.")]
    ran = [f for f in temp.glob("session_*/logs/worker-*.out")
           if ":task_name:_worker_evaluate" in f.read_text()]
    assert ran, "no Ray worker ran a candidate"


SLOW = """import torch
def run(x, w):
    s = 0
    for i in range(10**10):
        s += i
    return x * w
"""


def _descendants(roots: list[int]) -> dict[int, str]:
    """Every live process below ``roots``: pid -> command line."""
    parent: dict[int, int] = {}
    cmd: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (proc / "stat").read_text()
                parent[int(proc.name)] = int(stat.rsplit(")", 1)[1].split()[1])
                cmd[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    below, todo = {}, list(roots)
    while todo:
        pid = todo.pop()
        for child, ppid in parent.items():
            if ppid == pid and child not in below:
                below[child] = cmd.get(child, "")
                todo.append(child)
    return below


def test_sigterm_cancels_the_cluster_tasks(tmp_path: Path,
                                           cluster: tuple[str, Path, dict[str, str]]) -> None:
    """Interrupting the driver (connected with ``--ray auto`` through RAY_ADDRESS) ends its
    Ray tasks: no candidate keeps running on the cluster (nor the sandboxed worker below each
    Ray worker). Ray also ends a finished job's workers, so this shows the outcome, not which
    of the two (``ray.cancel`` in the executor's ``finally``, the job's end) got there first."""
    address, temp, env = cluster
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.replace("run_timeout_s: 60", "run_timeout_s: 600"))
    root = _dataset(tmp_path / "ds", {"slow": SLOW, "slow2": SLOW.replace("s = 0", "s = 1")})
    proc = subprocess.Popen([sys.executable, "-m", "sandboxharness.cli", "run", "--local",
                             str(root), "--ray", "auto", "--policy", str(policy), "--backend",
                             "process", "--seed", "3"], cwd=REPO,
                            env={**env, "RAY_ADDRESS": address}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def candidates() -> list[str]:
        return [c for c in _descendants(_ours(temp)).values() if "sandboxharness.worker" in c]

    # each evaluation runs its candidate's worker and its reference's side by side
    deadline = time.monotonic() + 120
    while len(candidates()) < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    assert len(candidates()) == 4, "both candidates (and their references) should be running"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    deadline = time.monotonic() + 30
    while candidates() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not candidates()
    assert not (root / "traces").exists()  # nothing finished, nothing written


def test_unreachable_cluster_is_one_line_exit_3(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds", {"good": GOOD})
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    (port,) = _free_ports(1)  # nobody listens there
    t0 = time.monotonic()
    res = _cli("run", "--local", str(root), "--policy", str(policy), "--ray",
               f"127.0.0.1:{port}", env=dict(os.environ))
    assert res.returncode == 3, res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "cannot be reached" in res.stderr and str(port) in res.stderr
    assert time.monotonic() - t0 < 60
    assert not (root / "traces").exists()


def test_no_ray_process_is_left_behind() -> None:
    with _cluster() as (address, temp, env):
        assert _ours(temp), "the cluster's processes should be running"
        assert _ray("status", "--address", address, env=env).returncode == 0
    assert not _ours(temp)
    host, port = address.rsplit(":", 1)
    with pytest.raises(OSError):  # the head's GCS port answers no more (`ray status` would
        socket.create_connection((host, int(port)), timeout=5).close()  # retry for minutes)
    raylets = subprocess.run(["pgrep", "-af", "raylet"], capture_output=True, text=True)
    assert str(temp) not in raylets.stdout


def test_worker_replies_are_rebuilt_with_their_error_family() -> None:
    """Bad input found on a worker stays bad input (exit 2); anything else of the harness is
    an infrastructure error naming the node (exit 3); a verdict is validated again."""
    from sandboxharness.dataset.engine import Task
    from sandboxharness.dataset.ray_exec import _rebuilt
    from sandboxharness.errors import InfrastructureError, InputError

    task = Task("rms_t", "good", 1, 0)
    bad = _rebuilt(task, {"error": ["PolicyError", "p.yaml: no", True], "node": "10.0.0.2"})
    assert type(bad.error) is InputError and str(bad.error) == "p.yaml: no"
    broke = _rebuilt(task, {"error": ["SandboxError", "no cgroup\nmore", False],
                            "node": "10.0.0.2", "wall_s": 2.5})
    assert type(broke.error) is InfrastructureError and broke.wall_s == 2.5
    assert str(broke.error) == "SandboxError on ray node 10.0.0.2: no cgroup\\nmore"
    with pytest.raises(ValueError):  # pydantic's ValidationError: a reply is not trusted blindly
        _rebuilt(task, {"verdict": {"decision": "promote"}})
