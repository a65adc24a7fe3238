"""The Docker backend end to end: real engine, real image, runc and gVisor (runsc).

Skipped, with the reason, where no engine answers or the worker image is missing (CI runs
scripts/ci_docker_setup.sh first, so there they run for real). Every test module checks at
the end that no labelled container was left behind.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

from sandboxharness.errors import SandboxError
from sandboxharness.intake import load_definition, load_solution, load_workloads
from sandboxharness.models.policy import Limits
from sandboxharness.models.verdict import ReasonCode
from sandboxharness.pipeline import Harness
from sandboxharness.sandbox.interface import JobSpec
from sandboxharness.stages.results import read_tensors
from sandboxharness.stages.session import KernelFault, WorkerSession
from tests.conftest import TRITON_RMS, fast_policy

pytestmark = [pytest.mark.docker, pytest.mark.slow]
LABEL = "sandboxharness.job"


def _ours(backend) -> list:  # type: ignore[no-untyped-def]
    """Labelled containers this test process created (others may run the harness meanwhile)."""
    return backend._api.containers(  # type: ignore[no-any-return]
        all=True, filters={"label": [f"sandboxharness.host-pid={os.getpid()}"]})


def _backend(runtime: str):  # type: ignore[no-untyped-def]
    from sandboxharness.sandbox.docker import DockerSandbox

    ok, why = DockerSandbox.available(runtime=runtime)
    if not ok:
        if os.environ.get("SANDBOXHARNESS_REQUIRE_DOCKER") == "1":  # CI: never skip silently
            pytest.fail(f"Docker backend ({runtime}) required but unavailable: {why}")
        pytest.skip(f"Docker backend ({runtime}) unavailable: {why}")
    return DockerSandbox(runtime=runtime)


@pytest.fixture(scope="module", params=["runc", "runsc"])
def sandbox(request):  # type: ignore[no-untyped-def]
    backend = _backend(request.param)
    yield backend
    leaked = _ours(backend)
    backend.close()
    assert leaked == [], f"containers left behind: {[c['Names'] for c in leaked]}"


@pytest.fixture(scope="module")
def runc_sandbox():  # type: ignore[no-untyped-def]
    backend = _backend("runc")
    yield backend
    leaked = _ours(backend)
    backend.close()
    assert leaked == [], f"containers left behind: {[c['Names'] for c in leaked]}"


def _job(tmp_path: Path, source: str, **limits: object) -> JobSpec:
    dirs = {k: tmp_path / k for k in ("src", "data", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(mode=0o700)
    (dirs["src"] / "cand.py").write_text(source)
    return JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["data"],
                   out_dir=dirs["out"], tmp_dir=dirs["tmp"],
                   limits=Limits(**{"memory_mb": 2048, **limits}),  # type: ignore[arg-type]
                   env={"TRITON_INTERPRET": "1"})


@contextlib.contextmanager
def _session(sandbox, job: JobSpec, deadline_s: float = 60):  # type: ignore[no-untyped-def]
    """A worker session that is closed (container removed) however the test ends."""
    session = WorkerSession(sandbox.start(job, deadline_s=deadline_s), deadline_s)
    try:
        yield session
    finally:
        session.close()


def _hello(session: WorkerSession, timeout: float = 120) -> dict:
    paths = session.paths
    return session.request({"op": "hello", "role": "candidate", "entry_file": "cand.py",
                            "entry_func": "run", "dps": False, "preload_triton": False,
                            "src": paths.src, "data": paths.data, "device": "cpu"}, timeout)


def _gone(sandbox, cid: str) -> bool:  # type: ignore[no-untyped-def]
    import docker.errors

    try:
        sandbox._api.inspect_container(cid)
    except docker.errors.NotFound:
        return True
    return False


# -- the pipeline --------------------------------------------------------------------------
def test_honest_triton_candidate_is_promoted(sandbox, tiny_def_path, tiny_wl_path,
                                             write_solution) -> None:
    """The honest path works under the hardened container (runc and gVisor)."""
    verdict = Harness(fast_policy(), sandbox=sandbox).evaluate(
        load_definition(tiny_def_path), load_solution(write_solution(TRITON_RMS)),
        load_workloads(tiny_wl_path), seed=7)
    assert verdict.decision == "promote", verdict.reasons
    assert verdict.environment.backend == "docker"
    assert "seccomp" in verdict.environment.isolation
    assert f"runtime:{sandbox.runtime}" in verdict.environment.isolation
    assert sandbox.image_digest.startswith("sha256:")


def test_wrong_candidate_is_rejected(runc_sandbox, tiny_def_path, tiny_wl_path,
                                     write_solution) -> None:
    """The container changes nothing about judging: a wrong kernel is still caught."""
    wrong = TRITON_RMS.replace("x * r * w", "x * r")
    verdict = Harness(fast_policy(), sandbox=runc_sandbox).evaluate(
        load_definition(tiny_def_path), load_solution(write_solution(wrong)),
        load_workloads(tiny_wl_path), seed=7)
    assert {r.code for r in verdict.reasons} == {ReasonCode.INCORRECT_NUMERICAL}


# -- lifecycle -------------------------------------------------------------------------------
def test_deadline_kills_and_removes_the_container(sandbox, tmp_path) -> None:
    """Attack: hang forever (at import) to hold the machine; the deadline kills the container."""
    job = _job(tmp_path, "import time\ntime.sleep(3600)\n")
    t0 = time.monotonic()
    with _session(sandbox, job, deadline_s=3) as session, \
            pytest.raises(KernelFault) as caught:
        cid = session.proc.container_id  # type: ignore[attr-defined]
        _hello(session, timeout=60)
    assert caught.value.code == ReasonCode.TIMEOUT
    assert time.monotonic() - t0 < 30
    assert session.exit is not None and session.exit.timed_out
    assert _gone(sandbox, cid)


def test_memory_limit_is_reported(runc_sandbox, tmp_path) -> None:
    """Attack: exhaust host memory; the cgroup limit OOM-kills the container, reported as such."""
    hog = "blob = bytearray(1 << 30)\nblob[::4096] = b'x' * len(blob[::4096])\n"
    job = _job(tmp_path, hog, memory_mb=256)
    with _session(runc_sandbox, job) as session, pytest.raises(KernelFault) as caught:
        _hello(session)
    assert caught.value.code == ReasonCode.RESOURCE_LIMIT, caught.value.message
    assert session.exit is not None and session.exit.limit_hit == "memory"


def test_out_dir_quota_stops_a_disk_filler(tmp_path) -> None:
    """Attack: fill the host's disk through the one writable host mount (/job/out)."""
    from sandboxharness.sandbox.docker import DockerSandbox

    _backend("runc").close()
    backend = DockerSandbox(runtime="runc", out_quota_mb=8)
    try:
        job = _job(tmp_path, "import os\nfor i in range(10**6):\n"
                             "    open(f'/job/out/f{i}', 'wb').write(os.urandom(1 << 20))\n")
        with _session(backend, job) as session, pytest.raises(KernelFault) as caught:
            _hello(session)
        assert caught.value.code == ReasonCode.RESOURCE_LIMIT
        assert session.exit is not None and session.exit.limit_hit == "disk"
        used = sum(p.stat().st_size for p in job.out_dir.iterdir())
        assert used < 256 * 1024 * 1024
    finally:
        backend.close()


def test_log_flood_is_capped(runc_sandbox, tmp_path) -> None:
    """Attack: flood stderr/stdout to exhaust the host's memory or hide the protocol."""
    job = _job(tmp_path, "import sys\nfor _ in range(2000):\n    print('x' * 1000)\n"
                         "    sys.stderr.write('y' * 1000)\ndef run(*a):\n    pass\n",
               max_log_bytes=4096)
    with _session(runc_sandbox, job) as session:
        reply = _hello(session)
    info = session.close()
    assert reply["ok"] is True
    assert len(info.stderr.encode()) <= 4096
    assert info.dropped_log_bytes > 3_000_000


def test_result_symlink_to_host_file_is_not_followed(runc_sandbox, tmp_path) -> None:
    """Attack: leave a symlink in /job/out that points at a host file, so the trusted side
    reads (and judges, or leaks) a file of the host's choosing instead of a result."""
    import torch
    from safetensors.torch import save_file

    secret = tmp_path / "host-secret.safetensors"
    save_file({"out.y": torch.ones(2)}, str(secret))
    job = _job(tmp_path, f"import os\nos.symlink({str(secret)!r}, "
                         "'/job/out/w_t0.safetensors')\ndef run(*a):\n    pass\n")
    with _session(runc_sandbox, job) as session:
        assert _hello(session)["ok"] is True
    link = job.out_dir / "w_t0.safetensors"
    assert link.is_symlink() and os.readlink(link) == str(secret)
    with pytest.raises(KernelFault) as caught:
        read_tensors(link, 1 << 20)
    assert caught.value.code == ReasonCode.WORKER_PROTOCOL


def test_cleanup_leaked_removes_old_labelled_containers(runc_sandbox) -> None:
    """A host that crashed mid-job leaves a labelled container; cleanup_leaked() removes it."""
    api = runc_sandbox._api
    cid = api.create_container(runc_sandbox.image_digest, command=["-c", "pass"],
                               labels={LABEL: "leak-test"},
                               host_config=api.create_host_config(network_mode="none"))["Id"]
    assert cid not in runc_sandbox.cleanup_leaked(older_than_s=3600)
    assert not _gone(runc_sandbox, cid)
    assert cid in runc_sandbox.cleanup_leaked(older_than_s=0)
    assert _gone(runc_sandbox, cid)


# -- errors ------------------------------------------------------------------------------------
def test_missing_image_is_a_sandbox_error() -> None:
    """A docker SDK failure surfaces as one SandboxError line, never a library exception."""
    from sandboxharness.sandbox.docker import DockerSandbox

    _backend("runc").close()
    with pytest.raises(SandboxError) as caught:
        DockerSandbox(image="sandboxharness-no-such-image:none")
    msg = str(caught.value)
    assert msg.startswith("docker: image sandboxharness-no-such-image:none not found")
    assert "\n" not in msg
    ok, why = DockerSandbox.available(image="sandboxharness-no-such-image:none")
    assert not ok and why == msg


def test_unreachable_engine_is_a_sandbox_error(monkeypatch) -> None:
    """No engine at DOCKER_HOST: SandboxError with one clear line (runs without an engine)."""
    from sandboxharness.sandbox.docker import DockerSandbox

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxError) as caught:
        DockerSandbox()
    assert str(caught.value).startswith("docker: ")
    assert "\n" not in str(caught.value)
