"""The offline worker image with the real engine (CPU): built by ``docker import`` from a
skeleton, the host's runtime bound read-only, a whole evaluation run through it.

This is the image the GPU machine uses (no registry there); here the runtime is this
machine's venv (torch CPU, Triton in its interpreter), so every piece but the device nodes is
exercised for real. Skipped with the reason where no engine answers (CI: never).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandboxharness.errors import SandboxError
from sandboxharness.intake import load_definition, load_solution, load_workloads
from sandboxharness.models.policy import Limits
from sandboxharness.models.verdict import ReasonCode
from sandboxharness.pipeline import Harness
from sandboxharness.sandbox.interface import JobSpec
from sandboxharness.stages.session import WorkerSession
from tests.conftest import TRITON_RMS, fast_policy

pytestmark = [pytest.mark.docker, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
TAG = f"sandboxharness-worker:offline-test-{os.getpid()}"

PROBE = r'''
import json, os, sys
f = {"uid": os.getuid(), "executable": sys.executable, "harness_visible": os.path.exists(HARNESS),
     "repo_listing": sorted(os.listdir(REPO)) if os.path.isdir(REPO) else None}
for p in ("/usr/shx-probe", sys.prefix + "/shx-probe", "/opt/venv/shx-probe", "/shx-probe"):
    try:
        open(p, "w").close()
        f["writable:" + p] = True
    except OSError as e:
        f["writable:" + p] = e.strerror
tmp = os.environ["TMPDIR"]
st = os.stat(tmp)
f["tmp"] = {"path": tmp, "owner_is_me": st.st_uid == os.getuid(), "mode": oct(st.st_mode & 0o777)}
exe = os.path.join(tmp, "t.sh")
open(exe, "w").write("#!/bin/sh\necho ran\n")
os.chmod(exe, 0o700)
import subprocess
f["tmp_exec"] = subprocess.run([exe], capture_output=True, text=True).stdout.strip()
import socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    f["inet"] = "allowed"
except OSError as e:
    f["inet"] = type(e).__name__
import torch, sandboxharness
f["torch"] = torch.__version__
f["worker_pkg"] = os.path.dirname(sandboxharness.__file__)
open("/job/out/facts.json", "w").write(json.dumps(f))
def run(*a):
    return None
'''


def _engine() -> Any:
    try:
        import docker

        client = docker.from_env(version="auto", timeout=60)
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001  no engine: skip (CI requires it)
        if os.environ.get("SANDBOXHARNESS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"Docker engine required but unavailable: {exc}")
        pytest.skip(f"no Docker engine: {exc}")


@pytest.fixture(scope="module")
def offline() -> Iterator[tuple[Any, Any]]:
    from sandboxharness.sandbox.docker import DockerSandbox
    from sandboxharness.sandbox.docker_hostrt import discover
    from sandboxharness.sandbox.docker_image import import_image

    client = _engine()
    rt = discover(gpu=False, forbidden=(str(REPO / "sandboxharness"), tempfile.gettempdir()))
    import_image(client.api, rt, TAG)
    backend = DockerSandbox(image=TAG)
    yield backend, rt
    leaked = backend._api.containers(
        all=True, filters={"label": [f"sandboxharness.host-pid={os.getpid()}"]})
    backend.close()
    client.images.remove(TAG, force=True)
    client.close()
    assert leaked == [], f"containers left behind: {[c['Names'] for c in leaked]}"


def test_image_is_a_skeleton_pinned_by_id(offline) -> None:
    """The image holds mount points, links and the worker sources only (no runtime of its
    own), is run by its id, and names the host paths it binds."""
    backend, rt = offline
    attrs = backend._api.inspect_image(TAG)
    assert attrs["Size"] < 2 * 1024 * 1024, attrs["Size"]
    assert backend.image_digest == attrs["Id"] and backend.image_digest.startswith("sha256:")
    assert backend.image_kind == "host-runtime"
    assert backend.host_binds == list(rt.binds) and "/usr" in rt.binds
    described = backend.describe()
    assert described["image_kind"] == "host-runtime"
    assert described["host_binds_ro"].split(",") == list(rt.binds)


def test_honest_and_wrong_candidates_through_the_offline_image(
        offline, tiny_def_path, tiny_wl_path, write_solution) -> None:
    """A whole evaluation in the offline image: the honest kernel is promoted, a wrong one
    rejected for its numbers, and the verdict records the image id and the bound paths."""
    backend, rt = offline
    good = Harness(fast_policy(), sandbox=backend).evaluate(
        load_definition(tiny_def_path), load_solution(write_solution(TRITON_RMS)),
        load_workloads(tiny_wl_path), seed=7)
    assert good.decision == "promote", good.reasons
    assert good.environment.extra["image_digest"] == backend.image_digest
    assert good.environment.extra["host_binds_ro"].split(",") == list(rt.binds)
    wrong = Harness(fast_policy(), sandbox=backend).evaluate(
        load_definition(tiny_def_path),
        load_solution(write_solution(TRITON_RMS.replace("x * r * w", "x * r"))),
        load_workloads(tiny_wl_path), seed=7)
    assert {r.code for r in wrong.reasons} == {ReasonCode.INCORRECT_NUMERICAL}


def test_offline_container_is_hardened(offline, tmp_path: Path) -> None:
    """Attacks: write into the bound runtime or the image root, reach the network, see the
    harness's own tree. The scratch dir is the job's own (owned by its uid, executable)."""
    backend, _ = offline
    dirs = {k: tmp_path / k for k in ("src", "data", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(mode=0o700)
    (dirs["src"] / "probe.py").write_text(PROBE.replace("HARNESS", repr(str(REPO / "sandboxharness")))
                                          .replace("REPO", repr(str(REPO))))
    job = JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["data"],
                  out_dir=dirs["out"], tmp_dir=dirs["tmp"], limits=Limits(memory_mb=2048),
                  env={"TRITON_INTERPRET": "1"})
    session = WorkerSession(backend.start(job, deadline_s=120), 120)
    p = session.paths
    reply = session.request({"op": "hello", "role": "candidate", "entry_file": "probe.py",
                             "entry_func": "run", "dps": False, "preload_triton": False,
                             "src": p.src, "data": p.data, "device": "cpu"}, 120)
    info = session.close()
    assert reply["ok"] is True, info.stderr
    f = json.loads((dirs["out"] / "facts.json").read_text())
    assert f["uid"] >= 200_000 and f["executable"] == "/opt/venv/bin/python3"
    assert f["worker_pkg"] == "/opt/venv/lib/python3.11/site-packages/sandboxharness"
    assert f["harness_visible"] is False
    assert all(v == "Read-only file system" for k, v in f.items() if k.startswith("writable:")), f
    assert f["inet"] == "PermissionError"
    assert f["tmp"] == {"path": "/job/tmp", "owner_is_me": True, "mode": "0o700"}
    assert f["tmp_exec"] == "ran"


def test_image_whose_bound_paths_are_gone_is_refused(offline) -> None:
    """An offline image built where the runtime was elsewhere is refused, never run half-bound."""
    from sandboxharness.sandbox.docker import DockerSandbox
    from sandboxharness.sandbox.docker_image import import_image

    backend, rt = offline
    moved = dataclasses.replace(rt, binds=(*rt.binds, "/nonexistent-shx-runtime"))
    tag = TAG + "-moved"
    import_image(backend._api, moved, tag)
    try:
        with pytest.raises(SandboxError, match="lacks"):
            DockerSandbox(image=tag)
    finally:
        backend._client.images.remove(tag, force=True)


GPU_PROBE = r'''
import json, os
f = {"dev": sorted(n for n in os.listdir("/dev") if n.startswith("nvidia")),
     "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "path": os.environ["PATH"],
     "tmp_owner_is_me": os.stat(os.environ["TMPDIR"]).st_uid == os.getuid()}
open("/job/out/facts.json", "w").write(json.dumps(f))
def run(*a):
    return None
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="device nodes are made with mknod (root)")
def test_gpu_job_gets_only_its_lanes_device_nodes(offline, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU job through the real engine, on a host whose NVIDIA nodes are stand-ins (character
    devices with /dev/null's numbers, made here): the container holds its lane's GPU node and
    the control nodes only, CUDA_VISIBLE_DEVICES names the one GPU it has, scratch is its own."""
    import functools

    from sandboxharness.sandbox import docker as docker_backend
    from sandboxharness.sandbox.docker_gpu import device_nodes

    backend, _ = offline
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"):
        os.mknod(dev / name, 0o666 | 0o020000, os.makedev(1, 3))
    monkeypatch.setattr(docker_backend, "device_nodes",
                        functools.partial(device_nodes, dev=dev, mapping=lambda: None))
    job_root = tmp_path / "job"
    dirs = {k: job_root / k for k in ("src", "data", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(mode=0o700, parents=True)
    (dirs["src"] / "probe.py").write_text(GPU_PROBE)
    job = JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["data"],
                  out_dir=dirs["out"], tmp_dir=dirs["tmp"], limits=Limits(memory_mb=2048),
                  env={"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "2"}, gpu=True)
    session = WorkerSession(backend.start(job, deadline_s=120), 120)
    p = session.paths
    reply = session.request({"op": "hello", "role": "candidate", "entry_file": "probe.py",
                             "entry_func": "run", "dps": False, "preload_triton": False,
                             "src": p.src, "data": p.data, "device": "cpu"}, 120)
    info = session.close()
    assert reply["ok"] is True, info.stderr
    f = json.loads((dirs["out"] / "facts.json").read_text())
    assert f["dev"] == ["nvidia-uvm", "nvidia2", "nvidiactl"]
    assert f["visible"] == "0" and f["tmp_owner_is_me"] is True
    assert f["path"].startswith("/opt/venv/bin:")
