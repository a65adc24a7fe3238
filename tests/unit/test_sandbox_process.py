"""The process backend, for real: what the worker sees and may do, exit statuses, limits,
timeouts, setup failures, and ``select_backend``."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sandboxharness.errors import PolicyError, SandboxError
from sandboxharness.models import Policy
from sandboxharness.models.policy import Limits
from sandboxharness.sandbox import JobSpec, capabilities, cgroups, select_backend
from sandboxharness.sandbox.interface import ExitInfo
from sandboxharness.sandbox.process import INNER_ROOT, ProcessSandbox

HARDENED = capabilities.namespaces()
needs_ns = pytest.mark.skipif(not HARDENED.ok, reason=f"no user namespaces: {HARDENED.detail}")

LOOK = r"""
import json, os, socket
res = {"uid": os.getuid(), "gid": os.getgid(), "pid": os.getpid(), "ppid": os.getppid(),
       "groups": os.getgroups(), "cwd": os.getcwd(), "env": dict(os.environ),
       "hostname": socket.gethostname(), "procs": sorted(p for p in os.listdir("/proc")
                                                      if p.isdigit())}
status = open("/proc/self/status").read()
res["caps"] = [l.split()[1] for l in status.splitlines() if l.startswith("Cap")]
res["seccomp"] = [l.split()[1] for l in status.splitlines() if l.startswith("Seccomp:")]
def can_write(path):
    try:
        with open(path, "w") as fh:
            fh.write("x")
        return True
    except OSError:
        return False
res["write"] = {p: can_write(p) for p in json.loads(os.environ["PROBE_WRITE"])}
res["exists"] = {p: os.path.exists(p) for p in json.loads(os.environ["PROBE_EXISTS"])}
os.write(1, json.dumps(res).encode())
"""


def _job(tmp: Path, **limits: Any) -> JobSpec:
    root = tmp / "shx-job-unit" / "candidate"
    dirs = {k: root / k for k in ("src", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(parents=True, mode=0o700)
    (dirs["src"] / "kernel.py").write_text("def run(x):\n    return x\n")
    data = tmp / "data"
    data.mkdir(exist_ok=True)
    return JobSpec(role="candidate", src_dir=dirs["src"], data_dir=data, out_dir=dirs["out"],
                   tmp_dir=dirs["tmp"], limits=Limits(**limits), env={"PROBE_X": "1"})


def _run(sandbox: ProcessSandbox, job: JobSpec, code: str, deadline: float = 30.0,
         env: dict[str, str] | None = None) -> tuple[bytes, ExitInfo, float]:
    if env:
        job = JobSpec(**{**job.__dict__, "env": {**job.env, **env}})
    t0 = time.monotonic()
    child = sandbox.start_command(job, deadline, [sys.executable, "-I", "-S", "-c", code])
    data = b""
    try:
        while chunk := child.recv(65536, deadline + 5):
            data += chunk
    except TimeoutError:
        pass
    info = child.wait(5.0) or child.kill()
    return data, info, time.monotonic() - t0


@needs_ns
def test_what_the_hardened_worker_sees(tmp_path: Path) -> None:
    hidden = tmp_path / "keys"
    hidden.mkdir()
    (hidden / "signing.key").write_text("KEY")
    job = _job(tmp_path)
    sandbox = ProcessSandbox(hardened=True, hidden_paths=[hidden])
    probes = {"PROBE_WRITE": json.dumps([f"{INNER_ROOT}/out/r", f"{INNER_ROOT}/tmp/t",
                                         f"{INNER_ROOT}/src/s", "/etc/x", "/tmp/x",
                                         str(Path(sys.prefix) / "x"), "/dev/shm/x"]),
              "PROBE_EXISTS": json.dumps([str(hidden / "signing.key"), str(job.src_dir),
                                          f"{INNER_ROOT}/src/kernel.py", "/var/run/docker.sock",
                                          sys.base_prefix, "/dev/null", "/dev/kmsg"])}
    data, info, _ = _run(sandbox, job, LOOK, env=probes)
    assert info.returncode == 0, info.stderr
    res = json.loads(data)
    assert res["uid"] != 0 and res["gid"] != 0 and res["pid"] == 2 and res["ppid"] == 1
    assert 0 not in res["groups"]
    assert set(res["caps"]) == {"0000000000000000"}
    assert res["seccomp"] == ["2"]
    assert res["hostname"] == "sandbox" and len(res["procs"]) <= 3
    assert res["cwd"] == f"{INNER_ROOT}/tmp" and res["env"]["HOME"] == f"{INNER_ROOT}/tmp"
    assert res["env"]["PROBE_X"] == "1" and "SHX_TEST_SECRET" not in res["env"]
    assert res["write"] == {f"{INNER_ROOT}/out/r": True, f"{INNER_ROOT}/tmp/t": True,
                            f"{INNER_ROOT}/src/s": False, "/etc/x": False, "/tmp/x": False,
                            str(Path(sys.prefix) / "x"): False, "/dev/shm/x": True}
    assert res["exists"] == {str(hidden / "signing.key"): False, str(job.src_dir): False,
                             f"{INNER_ROOT}/src/kernel.py": True, "/var/run/docker.sock": False,
                             sys.base_prefix: True, "/dev/null": True, "/dev/kmsg": False}
    assert (job.out_dir / "r").read_text() == "x"  # the out dir is the host's
    if os.geteuid() == 0:
        assert (job.out_dir / "r").stat().st_uid == sandbox.job_uids[-1]
    layers = sandbox.isolation()
    for layer in ("userns", "pidns", "netns", "mountns", "ipcns", "utsns", "seccomp",
                  "no_new_privs", "rlimits"):
        assert layer in layers


@needs_ns
def test_each_job_gets_its_own_uid(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("per-job uids need host root")
    sandbox = ProcessSandbox(hardened=True)
    for name in ("a", "b"):
        _run(sandbox, _job(tmp_path / name), "pass")
    assert len(set(sandbox.job_uids)) == 2


@pytest.mark.parametrize("hardened", [pytest.param(True, marks=needs_ns), False])
def test_exit_status_is_forwarded(tmp_path: Path, hardened: bool) -> None:
    sandbox = ProcessSandbox(hardened=hardened)
    _, info, _ = _run(sandbox, _job(tmp_path / "a"), "raise SystemExit(3)")
    assert info.returncode == 3 and not info.timed_out
    _, info, _ = _run(sandbox, _job(tmp_path / "b"), "import os; os.kill(os.getpid(), 11)")
    assert info.returncode == -11


@pytest.mark.parametrize("hardened", [pytest.param(True, marks=needs_ns), False])
def test_deadline_kills_the_whole_tree(tmp_path: Path, hardened: bool) -> None:
    code = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid(); os.closerange(0, 3); time.sleep(600)\n"
            "time.sleep(600)\n")
    sandbox = ProcessSandbox(hardened=hardened)
    _, info, elapsed = _run(sandbox, _job(tmp_path), code, deadline=2.0)
    assert info.timed_out and elapsed < 10


@needs_ns
def test_pids_limit_is_reported(tmp_path: Path) -> None:
    sandbox = ProcessSandbox(hardened=True)
    if "cgroups" not in sandbox.isolation():
        pytest.skip("no cgroups here")
    code = "import os\nwhile True:\n    if os.fork() == 0:\n        os.closerange(0, 3)\n" \
           "        import time; time.sleep(60)\n"
    _, info, _ = _run(sandbox, _job(tmp_path, max_processes=16), code)
    assert info.returncode == 1 and info.limit_hit == "pids"
    assert "BlockingIOError" in info.stderr


@needs_ns
def test_memory_limit_is_reported(tmp_path: Path) -> None:
    sandbox = ProcessSandbox(hardened=True)
    if "cgroups" not in sandbox.isolation():
        pytest.skip("no cgroups here")
    _, info, _ = _run(sandbox, _job(tmp_path, memory_mb=128),
                      "x = [bytearray(32 << 20) for _ in range(64)]")
    assert info.returncode == -9 and info.limit_hit == "memory"


def _job_cgroups() -> set[Path]:
    """This process's job cgroups (its own v1 memory cgroup is private to it)."""
    support = cgroups.detect()
    return {d for h in support.by_controller.values() for d in h.parent.glob("shx-*")}


@needs_ns
def test_hiding_the_runtime_is_refused(tmp_path: Path) -> None:
    before = _job_cgroups()
    sandbox = ProcessSandbox(hardened=True, hidden_paths=[sys.base_prefix])
    with pytest.raises(SandboxError, match="Python runtime"):
        sandbox.start(_job(tmp_path), 10)
    assert _job_cgroups() <= before


@needs_ns
def test_setup_failure_is_a_sandbox_error(tmp_path: Path) -> None:
    before = _job_cgroups()
    job = _job(tmp_path)
    job = JobSpec(**{**job.__dict__, "data_dir": tmp_path / "missing"})
    with pytest.raises(SandboxError, match="sandbox"):
        ProcessSandbox(hardened=True).start(job, 10)
    assert _job_cgroups() <= before


def test_plain_variant_uses_host_paths(tmp_path: Path) -> None:
    sandbox = ProcessSandbox(hardened=False)
    job = _job(tmp_path)
    child = sandbox.start(job, 30)
    try:
        assert child.paths.out == str(job.out_dir) and child.paths.tmp == str(job.tmp_dir)
    finally:
        child.kill()
    assert "userns" not in sandbox.isolation() and "seccomp" in sandbox.isolation()


def test_select_backend() -> None:
    policy = Policy(name="t")
    backend = select_backend("process", policy)
    assert backend.name == "process"
    with pytest.raises(PolicyError):
        select_backend("chroot", policy)
    strict = Policy.model_validate({"name": "t", "sandbox": {"require": ["gvisor"]}})
    with pytest.raises(PolicyError, match="gvisor"):
        select_backend("process", strict)
    if HARDENED.ok:
        assert "netns" in select_backend("auto", policy).isolation()


HOST = r"""
import sys, time
from pathlib import Path
from sandboxharness.models.policy import Limits
from sandboxharness.sandbox import JobSpec
from sandboxharness.sandbox.process import ProcessSandbox
root = Path(sys.argv[1])
dirs = {k: root / k for k in ("src", "out", "tmp")}
for d in dirs.values():
    d.mkdir(parents=True)
job = JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["src"], out_dir=dirs["out"],
              tmp_dir=dirs["tmp"], limits=Limits())
sandbox = ProcessSandbox(hardened=True)
sandbox.start_command(job, 600, [sys.executable, "-I", "-S", "-c", "import time; time.sleep(600)"])
print(sandbox.job_uids[-1], flush=True)
time.sleep(600)
"""


@needs_ns
def test_host_death_takes_the_sandbox_down(tmp_path: Path) -> None:
    """If the harness process dies, nothing of its sandbox keeps running."""
    if os.geteuid() != 0:
        pytest.skip("identifies the sandbox by its per-job uid (host root only)")
    import signal
    import subprocess

    from tests.escape.support import processes_of

    cgroups_before = _job_cgroups()
    host = subprocess.Popen([sys.executable, "-c", HOST, str(tmp_path / "job")],
                            stdout=subprocess.PIPE, text=True)
    assert host.stdout is not None
    uid = int(host.stdout.readline())
    assert processes_of({uid}), "the sandboxed sleeper should be running"
    host.send_signal(signal.SIGKILL)
    host.wait()
    deadline = time.monotonic() + 5
    while processes_of({uid}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_of({uid}) == []
    for d in _job_cgroups() - cgroups_before:  # what a dead host leaves: empty job cgroups
        d.rmdir()
