"""The Docker backend's pieces that need no engine: container settings, host-dir preparation,
error translation, the out-dir quota and the attach-stream demultiplexer."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from sandboxharness.errors import SandboxError
from sandboxharness.models.policy import Limits
from sandboxharness.sandbox.docker_config import (
    CONTAINER_PATHS,
    ContainerSettings,
    JobExtras,
    container_env,
    create_args,
    prepare_host_dirs,
    worker_sha256,
)
from sandboxharness.sandbox.docker_stream import AttachStream
from sandboxharness.sandbox.interface import JobSpec
from sandboxharness.sandbox.out_quota import OutDirWatch

REPO = Path(__file__).resolve().parents[2]


def _job(tmp_path: Path, **env: str) -> JobSpec:
    dirs = {k: tmp_path / k for k in ("src", "data", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(mode=0o700)
    return JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["data"],
                   out_dir=dirs["out"], tmp_dir=dirs["tmp"],
                   limits=Limits(memory_mb=1024, max_processes=64, max_open_files=128,
                                 max_file_size_mb=16, cpu_time_s=30), env=dict(env))


def _args(job: JobSpec, user: tuple[int, int] = (200001, 200001), gpu: object = None):  # type: ignore[no-untyped-def]
    def kw(**k: object) -> dict:
        return dict(k)

    return create_args(job, image_id="sha256:abc", runtime="runc", seccomp="{}",
                       settings=ContainerSettings(), user=user, name="n", labels={"l": "1"},
                       ulimit_type=kw, mount_type=kw, log_config="none",
                       extras=JobExtras(device_request=gpu))


def test_container_is_hardened(tmp_path: Path) -> None:
    """Every flag that makes the container a sandbox is set explicitly, never left to defaults."""
    container, host = _args(_job(tmp_path))
    assert host["network_mode"] == "none" and container["network_disabled"] is True
    assert host["read_only"] is True
    assert host["cap_drop"] == ["ALL"] and "cap_add" not in host
    assert host["privileged"] is False
    assert "no-new-privileges" in host["security_opt"]
    assert any(o.startswith("seccomp=") for o in host["security_opt"])
    assert host["init"] is True
    assert host["mem_limit"] == host["memswap_limit"] == 1024 * 1024 * 1024
    assert host["pids_limit"] == 64
    assert host["nano_cpus"] > 0
    limits = {u["name"]: (u["soft"], u["hard"]) for u in host["ulimits"]}
    assert limits == {"core": (0, 0), "nofile": (128, 128), "fsize": (16 << 20, 16 << 20),
                      "nproc": (64, 64), "cpu": (30, 30)}
    assert container["user"] == "200001:200001"
    assert container["image"] == "sha256:abc"  # by id, never by tag
    assert container["tty"] is False and container["stdin_open"] is True
    assert "device_requests" not in host


def test_mounts_sources_read_only_out_writable(tmp_path: Path) -> None:
    job = _job(tmp_path)
    _, host = _args(job)
    mounts = {m["target"]: m for m in host["mounts"]}
    assert set(mounts) == {"/job/src", "/job/data", "/job/out"}
    assert mounts["/job/src"]["read_only"] and mounts["/job/data"]["read_only"]
    assert not mounts["/job/out"]["read_only"]
    assert mounts["/job/src"]["source"] == str(job.src_dir)
    assert all(m["type"] == "bind" for m in mounts.values())
    tmp = host["tmpfs"]["/job/tmp"]
    assert "size=" in tmp and "nosuid" in tmp and "uid=200001" in tmp
    assert "noexec" in host["tmpfs"]["/tmp"]


def test_root_user_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError):
        _args(_job(tmp_path), user=(0, 0))


def test_gpu_request_is_passed(tmp_path: Path) -> None:
    _, host = _args(_job(tmp_path), gpu="GPU")
    assert host["device_requests"] == ["GPU"]


def test_environment_names_container_paths_only(tmp_path: Path) -> None:
    """Attack: learn host paths (and from them users, layout) through the environment."""
    job = _job(tmp_path, EXTRA=str(tmp_path / "data" / "blob"))
    env = container_env(job)
    assert env["HOME"] == env["TMPDIR"] == CONTAINER_PATHS.tmp
    assert env["TRITON_CACHE_DIR"].startswith(CONTAINER_PATHS.tmp + "/")
    assert env["EXTRA"] == "/job/data/blob"
    assert not any(str(tmp_path) in v for v in env.values())


def test_host_tool_paths_replaced_by_image_paths(tmp_path: Path) -> None:
    env = container_env(_job(tmp_path, PATH="/root/.venv/bin:/usr/bin", CUDA_HOME="/opt/cuda"))
    assert env["PATH"].split(":")[0] == "/opt/venv/bin" and "/root" not in env["PATH"]
    assert env["CUDA_HOME"] == "/usr/local/cuda"


def test_per_job_users_differ_and_are_unprivileged() -> None:
    users = {ContainerSettings().job_user() for _ in range(20)}
    assert len(users) > 1 and all(uid >= 100_000 for uid, _ in users)
    assert ContainerSettings(user=(65534, 65534)).job_user() == (65534, 65534)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_host_dirs_src_readable_out_owned_by_job_user(tmp_path: Path) -> None:
    job = _job(tmp_path)
    (job.src_dir / "pkg").mkdir()
    (job.src_dir / "pkg" / "k.py").write_text("x = 1\n")
    prepare_host_dirs(job, (200001, 200002))
    out = os.stat(job.out_dir)
    assert (out.st_uid, out.st_gid, stat.S_IMODE(out.st_mode)) == (200001, 200002, 0o700)
    f = os.stat(job.src_dir / "pkg" / "k.py")
    assert f.st_gid == 200002 and stat.S_IMODE(f.st_mode) == 0o640  # readable, not writable
    assert stat.S_IMODE(os.stat(job.src_dir / "pkg").st_mode) == 0o750


def test_symlinked_job_dir_is_refused(tmp_path: Path) -> None:
    job = _job(tmp_path)
    os.rmdir(job.out_dir)
    os.symlink("/etc", job.out_dir)
    with pytest.raises(SandboxError, match="symlink"):
        prepare_host_dirs(job, (200001, 200001))


def test_worker_hash_matches_build_script() -> None:
    """build.sh labels the image with this hash; a stale image is refused by the backend."""
    shell = subprocess.run([str(REPO / "containers" / "worker_sha.sh")], capture_output=True,
                           text=True, check=True)
    assert shell.stdout.strip() == worker_sha256()


def test_worker_hash_covers_the_input_generator(tmp_path: Path) -> None:
    """The image ships inputs/ beside worker/: a change in either is a stale image."""
    for pkg in ("worker", "inputs"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "a.py").write_text("x = 1\n")
    before = worker_sha256(tmp_path)
    (tmp_path / "inputs" / "a.py").write_text("x = 2\n")
    assert worker_sha256(tmp_path) != before


def test_unreachable_engine_is_one_line_sandbox_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """SDK/HTTP failures surface as SandboxError with one clear line, never a library error."""
    pytest.importorskip("docker")
    from sandboxharness.sandbox.docker import DockerSandbox

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxError) as caught:
        DockerSandbox()
    assert str(caught.value).startswith("docker: ") and "\n" not in str(caught.value)
    ok, why = DockerSandbox.available()
    assert not ok and why.startswith("docker: ")


def test_unknown_runtime_is_refused() -> None:
    pytest.importorskip("docker")
    from sandboxharness.sandbox.docker import DockerSandbox

    with pytest.raises(SandboxError, match="runtime"):
        DockerSandbox(runtime="crun-with-extras")


def test_translated_maps_sdk_errors() -> None:
    docker_errors = pytest.importorskip("docker.errors")
    requests_exc = pytest.importorskip("requests.exceptions")
    from sandboxharness.sandbox.docker import translated

    for exc in (docker_errors.NotFound("No such image: x\nmore"),
                docker_errors.DockerException("boom"),
                requests_exc.ConnectionError("refused"), ConnectionResetError(104, "reset")):
        with pytest.raises(SandboxError) as caught, translated("step"):
            raise exc
        assert str(caught.value).startswith("docker: step: ") and "\n" not in str(caught.value)


# -- out-dir quota ---------------------------------------------------------------------------
def test_out_dir_watch_fires_on_bytes_and_entries(tmp_path: Path) -> None:
    fired = threading.Event()
    watch = OutDirWatch(tmp_path, max_bytes=64 * 1024, max_entries=1000,
                        on_exceeded=fired.set, interval_s=0.02)
    (tmp_path / "big").write_bytes(os.urandom(256 * 1024))
    assert fired.wait(5) and watch.exceeded and "quota" in watch.exceeded
    watch.stop()

    fired2 = threading.Event()
    sub = tmp_path / "many"
    sub.mkdir()
    for i in range(30):
        (sub / str(i)).touch()
    watch2 = OutDirWatch(sub, max_bytes=1 << 30, max_entries=10, on_exceeded=fired2.set,
                         interval_s=0.02)
    assert fired2.wait(5)
    watch2.stop()


def test_out_dir_watch_quiet_under_quota(tmp_path: Path) -> None:
    fired = threading.Event()
    watch = OutDirWatch(tmp_path, max_bytes=1 << 20, max_entries=100, on_exceeded=fired.set,
                        interval_s=0.02)
    (tmp_path / "small").write_bytes(b"x" * 100)
    assert not fired.wait(0.2)
    watch.stop()


# -- attach stream -----------------------------------------------------------------------------
def _frame(kind: int, data: bytes) -> bytes:
    return bytes([kind, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


def test_stream_demultiplexes_stdout_and_caps_stderr() -> None:
    ours, theirs = socket.socketpair()
    stream = AttachStream(ours, log_cap=10, high_water=1 << 20)
    theirs.sendall(_frame(2, b"log line 1\n") + _frame(1, b"SHW1") + _frame(2, b"more")
                   + _frame(1, b"rest"))
    got = b""
    while len(got) < 8:
        got += stream.recv(100, timeout=5)
    assert got == b"SHW1rest"  # stderr never reaches the channel
    theirs.close()
    assert stream.recv(100, timeout=5) == b""  # EOF
    stream.close()
    assert stream.log_text() == "log line 1"
    assert stream.dropped == len(b"log line 1\n") + 4 - 10


def test_stream_recv_times_out_and_send_reaches_stdin() -> None:
    ours, theirs = socket.socketpair()
    stream = AttachStream(ours, log_cap=10, high_water=1 << 20)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        stream.recv(10, timeout=0.1)
    assert time.monotonic() - t0 < 2
    stream.send(b"request")
    assert theirs.recv(100) == b"request"
    stream.close()
    with pytest.raises(BrokenPipeError):
        stream.send(b"late")
    theirs.close()


def test_stream_applies_back_pressure_to_a_stdout_flood() -> None:
    """Attack: flood stdout so the host buffers without bound; the reader stops reading."""
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    stream = AttachStream(ours, log_cap=10, high_water=64 * 1024)
    sent = 0
    deadline = time.monotonic() + 5
    chunk = _frame(1, b"z" * 65536)
    while time.monotonic() < deadline:
        try:
            sent += theirs.send(chunk)
        except BlockingIOError:
            time.sleep(0.05)
            try:
                sent += theirs.send(chunk)
            except BlockingIOError:
                break
    assert sent < 64 * 1024 * 1024  # the writer blocked: the host did not swallow it all
    assert len(stream._out) <= 64 * 1024 + 65536
    stream.close()
    theirs.close()
