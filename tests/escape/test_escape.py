"""One test per attack: each runs a hostile kernel through Harness.evaluate on every backend
and checks the verdict (a reject with a clear reason), the host (unchanged) and the time
the harness took (the run timeout plus a small bound)."""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

import pytest

import sandboxharness
from tests.escape.support import ESCAPE_POLICY, Runner, attack_source

RUNTIME, PROTOCOL, LIMIT, TIMEOUT = ("RUNTIME_ERROR", "WORKER_PROTOCOL", "RESOURCE_LIMIT",
                                     "TIMEOUT")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- resources ----------------------------------------------------------------------------------
def test_memory_bomb(run_attack: Runner) -> None:
    """Memory bomb: allocate and touch memory until something stops it. It must be the memory
    limit: the call's wall clock is raised out of the way (touching 2 GiB took 3-4 s on a
    loaded 2-core machine, close to the suite's 6 s)."""
    roomy = ESCAPE_POLICY.model_copy(update={"limits": ESCAPE_POLICY.limits.model_copy(
        update={"run_timeout_s": 30.0})})
    out = run_attack(attack_source("memory_bomb"), policy=roomy)
    if "cgroups" in out.sandbox.isolation():
        out.rejected_with(LIMIT)
        assert "memory" in out.text
    else:  # rlimit only: the allocation fails inside the worker
        out.rejected_with(LIMIT, RUNTIME)


def test_cpu_spin(run_attack: Runner) -> None:
    """CPU spin: an endless busy loop is killed at the wall-clock limit."""
    run_attack(attack_source("cpu_spin")).rejected_with(TIMEOUT, LIMIT)


def test_sleep_past_timeout(run_attack: Runner) -> None:
    """Sleeping far past the timeout is killed at the wall-clock limit."""
    run_attack(attack_source("sleep_forever")).rejected_with(TIMEOUT)


def test_ignore_sigterm(run_attack: Runner) -> None:
    """Ignoring and blocking SIGTERM/SIGINT/SIGHUP does not stop the kill."""
    run_attack(attack_source("ignore_sigterm")).rejected_with(TIMEOUT)


def test_orphan_escapes_process_group(run_attack: Runner, tmp_path: Path) -> None:
    """A double-forked, setsid'd child ignoring SIGTERM must die with the job."""
    workdir = tmp_path / "jobs"
    workdir.mkdir()
    out = run_attack(attack_source("orphan_escape"), keep_jobs=True, workdir=workdir)
    out.rejected_with(TIMEOUT)
    beats = list(workdir.glob("shx-job-*/candidate/out/heartbeat"))
    size = beats[0].stat().st_size if beats else 0
    time.sleep(1.5)
    assert (beats[0].stat().st_size if beats else 0) == size, "orphan still alive on the host"


def test_fork_bomb(run_attack: Runner) -> None:
    """Fork bomb: the process limits refuse the forks; nothing is left on the host."""
    out = run_attack(attack_source("fork_bomb"))
    out.rejected_with(RUNTIME, LIMIT)


def test_thousands_of_temp_files(run_attack: Runner) -> None:
    """Thousands of temp files: the scratch space runs out of inodes, not the host."""
    out = run_attack(attack_source("many_temp_files"))
    # both backends cap the scratch tmpfs's inodes: the candidate gets ENOSPC
    out.rejected_with(RUNTIME, LIMIT)
    if RUNTIME in out.codes:
        assert "No space left" in out.text


def test_huge_file(run_attack: Runner) -> None:
    """A huge file in the out dir: the file-size limit stops it at max_file_size_mb."""
    out = run_attack(attack_source("huge_file"))
    out.rejected_with(RUNTIME, LIMIT)


def test_out_dir_flood(run_attack: Runner) -> None:
    """Flooding the out dir (host disk) with files: the out-dir quota kills the job."""
    out = run_attack(attack_source("out_dir_flood"))
    out.rejected_with(LIMIT, RUNTIME)


def test_huge_stdout_stderr(run_attack: Runner) -> None:
    """Flooding stdout/stderr: the harness keeps a capped log and kills at the timeout."""
    out = run_attack(attack_source("huge_output"))
    out.rejected_with(TIMEOUT, LIMIT)
    assert len(out.text) < 200_000


# -- network -----------------------------------------------------------------------------------
def test_network_connect_localhost_listener(run_attack: Runner) -> None:
    """Network: connecting to a listener on the host's 127.0.0.1 must fail."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        out = run_attack(attack_source("net_connect", port=str(port)))
        out.rejected_with(RUNTIME)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


def test_dns_lookup(run_attack: Runner) -> None:
    """DNS: resolving an outside name must fail (no channel out)."""
    out = run_attack(attack_source("dns_lookup"))
    out.rejected_with(RUNTIME)
    assert "resolved:" not in out.text


def test_raw_socket(run_attack: Runner) -> None:
    """Raw sockets (AF_PACKET, raw ICMP) are refused."""
    run_attack(attack_source("raw_socket")).rejected_with(RUNTIME)


def test_netlink_socket(run_attack: Runner) -> None:
    """A raw netlink socket (route configuration, kernel attack surface) is refused."""
    run_attack(attack_source("netlink_socket")).rejected_with(RUNTIME)


def test_docker_socket(run_attack: Runner) -> None:
    """The container engine's Unix socket (root on the host) is out of reach."""
    out = run_attack(attack_source("docker_socket"))
    out.rejected_with(RUNTIME)
    assert "DOCKER:" not in out.text


# -- secrets -----------------------------------------------------------------------------------
def test_environment_secret(run_attack: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the harness's environment (own env, /proc/*/environ, cmdline) for a secret."""
    secret = f"shx-secret-{secrets.token_hex(12)}"
    monkeypatch.setenv("SHX_TEST_SECRET", secret)
    out = run_attack(attack_source("env_secret"))
    out.rejected_with(RUNTIME)
    assert secret not in out.text


def test_read_etc_shadow(run_attack: Runner) -> None:
    """Reading /etc/shadow (password hashes) must be refused."""
    out = run_attack(attack_source("read_file", target="/etc/shadow"))
    out.rejected_with(RUNTIME)
    assert "READ:" not in out.text


def test_read_signing_key(run_attack: Runner, secrets_dir: Path) -> None:
    """Reading the audit log's signing key (a hidden path) must fail."""
    key = secrets_dir / "keys" / "signing.key"
    out = run_attack(attack_source("read_file", target=str(key)))
    out.rejected_with(RUNTIME)
    assert key.read_text().strip() not in out.text


def test_read_audit_log(run_attack: Runner, secrets_dir: Path) -> None:
    """Reading the audit log (a hidden path) must fail."""
    log = secrets_dir / "audit.log"
    out = run_attack(attack_source("read_file", target=str(log)))
    out.rejected_with(RUNTIME)
    assert "LOG-" not in out.text


def test_read_raw_block_device(run_attack: Runner) -> None:
    """Reading the host's root block device (all files, bypassing permissions) must fail."""
    device = next((line.split()[0] for line in Path("/proc/mounts").read_text().splitlines()
                   if line.split()[1] == "/" and line.startswith("/dev/")), "/dev/sda")
    out = run_attack(attack_source("read_file", target=device))
    out.rejected_with(RUNTIME)
    assert "READ:" not in out.text


# -- writes outside the work dir ------------------------------------------------------------
def test_write_host_tmp_marker(run_attack: Runner) -> None:
    """Writing a marker into the host's /tmp must not reach the host."""
    marker = Path(f"/tmp/shx-escape-marker-{secrets.token_hex(6)}")
    try:
        out = run_attack(attack_source("write_file", target=str(marker)))
        assert not marker.exists(), "the candidate wrote into the host's /tmp"
        if out.sandbox.name == "docker" and out.verdict.decision == "promote":
            return  # the container's /tmp is its own scratch tmpfs: the write stayed there
        out.rejected_with(RUNTIME)
    finally:
        marker.unlink(missing_ok=True)


def test_write_harness_package(run_attack: Runner) -> None:
    """Planting a module in the harness's own package directory must fail."""
    target = Path(sandboxharness.__file__).parent / f"pwned_{secrets.token_hex(4)}.py"
    try:
        run_attack(attack_source("write_file", target=str(target))).rejected_with(RUNTIME)
        assert not target.exists(), "the candidate wrote into the harness package"
    finally:
        target.unlink(missing_ok=True)


def test_write_audit_log(run_attack: Runner, secrets_dir: Path) -> None:
    """Appending to the audit log (a hidden path) must fail and leave it unchanged."""
    log = secrets_dir / "audit.log"
    before = _digest(log)
    run_attack(attack_source("write_file", target=str(log))).rejected_with(RUNTIME)
    assert _digest(log) == before


def test_result_symlink_to_host_file(run_attack: Runner, tmp_path: Path) -> None:
    """Result files replaced by symlinks to a host file, on every call after the first: each
    call's results are judged and removed before the candidate's code runs again, so there is
    nothing left to swap (a swap would be refused: the host opens results O_NOFOLLOW, see
    tests/unit/test_results.py). The honest x + 1 it returns is what is judged."""
    decoy = tmp_path / "decoy.safetensors"
    decoy.write_bytes(b"DECOY-NOT-A-RESULT")
    out = run_attack(attack_source("result_symlink", decoy=str(decoy)))
    assert out.verdict.decision == "promote", out.text[:2000]
    assert decoy.read_bytes() == b"DECOY-NOT-A-RESULT"


def test_result_hardlink_to_host_file(run_attack: Runner) -> None:
    """Result files replaced by hard links to /etc/passwd: nothing is left to replace (each
    call is judged and its files removed at once), and /etc/passwd is untouched."""
    before = _digest(Path("/etc/passwd"))
    out = run_attack(attack_source("result_hardlink"))
    assert out.verdict.decision == "promote", out.text[:2000]
    assert _digest(Path("/etc/passwd")) == before


# -- syscalls the sandbox refuses --------------------------------------------------------------
@pytest.mark.parametrize("attack", [
    "ptrace_parent", "mount", "unshare", "setns", "clone_newuser", "x32_unshare", "bpf",
    "perf_event_open", "io_uring_setup", "keyctl", "userfaultfd",
])
def test_ctypes_denied_syscall(run_attack: Runner, attack: str) -> None:
    """ctypes straight to libc's syscall(): ptrace of the parent, mount, unshare, setns,
    clone with CLONE_NEWUSER, the x32-ABI bypass, bpf, perf_event_open, io_uring, keyctl,
    userfaultfd -- each must be refused (EPERM/EACCES) or the process killed by the filter
    (docker's profile kills foreign-ABI calls with SIGSYS), never performed."""
    out = run_attack(attack_source("syscalls", attack=attack))
    out.rejected_with(RUNTIME, PROTOCOL)
    if out.codes == {PROTOCOL}:
        assert "seccomp" in out.text, out.text[:2000]


def test_cgroup_escape(run_attack: Runner) -> None:
    """Moving itself to the root cgroup (out of the memory/pids limits) must fail."""
    run_attack(attack_source("cgroup_escape")).rejected_with(RUNTIME)


def test_write_kernel_tunables(run_attack: Runner) -> None:
    """Writing /proc/sys and /proc/sysrq-trigger must fail."""
    before = socket.gethostname()
    run_attack(attack_source("proc_sys_write")).rejected_with(RUNTIME)
    assert socket.gethostname() == before


# -- other processes -----------------------------------------------------------------------------
def test_kill_harness(run_attack: Runner) -> None:
    """Killing the harness by its host pid must fail (and the harness is still here)."""
    out = run_attack(attack_source("kill_pid", pid=str(os.getpid())))
    out.rejected_with(RUNTIME)


def test_kill_everything(run_attack: Runner) -> None:
    """kill -9 -1 and kill of the parent: nothing outside the sandbox is hit."""
    sibling = subprocess.Popen(["sleep", "60"])
    try:
        out = run_attack(attack_source("kill_everything"))
        out.rejected_with(RUNTIME, PROTOCOL)
        assert sibling.poll() is None, "a host process was killed"
    finally:
        sibling.kill()
        sibling.wait()


def test_kill_sibling_process(run_attack: Runner) -> None:
    """Killing a sibling process of the harness by pid must fail."""
    sibling = subprocess.Popen(["sleep", "60"])
    try:
        out = run_attack(attack_source("kill_pid", pid=str(sibling.pid)))
        out.rejected_with(RUNTIME)
        assert sibling.poll() is None, "the sibling was killed"
    finally:
        sibling.kill()
        sibling.wait()


def test_other_candidate_files(run_attack: Runner, open_workdir: Path) -> None:
    """Another candidate's files: a second job must not see the first job's sources/outputs
    (kept in a world-readable work dir outside /tmp, so that only hiding can protect them)."""
    workdir = open_workdir
    marker = f"marker_{secrets.token_hex(8)}"
    honest = f"# {marker}\ndef run(x):\n    return x + 1\n"
    first = run_attack(honest, name="first", keep_jobs=True, workdir=workdir)
    assert first.verdict.decision == "promote", first.verdict.reasons
    (job_root,) = workdir.glob("shx-job-*")
    for path in [workdir, *workdir.rglob("*")]:  # take permissions out of the picture
        path.chmod(0o755 if path.is_dir() else 0o644)
    src = job_root / "candidate" / "src" / "kernel.py"
    outs = job_root / "candidate" / "out"
    (outs / "kept.safetensors").write_text(marker)  # results are judged and removed: plant one
    assert marker in src.read_text()
    paths = "|".join([str(src), str(outs), str(job_root)])
    out = run_attack(attack_source("peek_other_job", paths=paths, marker=marker),
                     name="second", workdir=workdir)
    out.rejected_with(RUNTIME)
    assert "FOUND OTHER JOB" not in out.text
