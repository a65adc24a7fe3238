"""GPU pass-through for the Docker backend, without an engine or a GPU: which device nodes a
job gets, how its CUDA_VISIBLE_DEVICES is renumbered, and what the container is created with."""

from __future__ import annotations

import os
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
)
from sandboxharness.sandbox.docker_gpu import device_nodes, driver_lib_binds, lane_minors
from sandboxharness.sandbox.interface import JobSpec


def _dev(tmp_path: Path, *names: str) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir()
    for n in names:
        (dev / n).write_text("")
    return dev


def _no_nvml() -> None:
    return None


def test_only_the_lanes_gpu_and_the_control_nodes(tmp_path: Path) -> None:
    """Attack: reach another lane's GPU (its memory, its timing window) from a job."""
    dev = _dev(tmp_path, "nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm",
               "nvidia-uvm-tools", "nvidia-modeset")
    entries, env = device_nodes("1", dev=dev, mapping=_no_nvml)
    hosts = [e.split(":")[0] for e in entries]
    assert hosts == [str(dev / n) for n in ("nvidia1", "nvidiactl", "nvidia-uvm",
                                            "nvidia-uvm-tools")]
    assert all(e.endswith(":rwm") and ":/dev/" in e for e in entries)
    assert env == {"CUDA_VISIBLE_DEVICES": "0"}  # the only GPU the container can open


def test_nvml_maps_cuda_index_and_uuid_to_device_minor() -> None:
    table = ({"0": 3, "1": 0}, {"GPU-aaaa": 3, "GPU-bbbb": 0})
    assert lane_minors("0", available=[0, 3], mapping=lambda: table) == [3]
    assert lane_minors("GPU-bbbb", available=[0, 3], mapping=lambda: table) == [0]
    assert lane_minors(None, available=[0, 3], mapping=lambda: table) == [0, 3]


def test_unknown_or_absent_gpu_is_a_sandbox_error(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="no device node"):
        lane_minors("5", available=[0, 1], mapping=_no_nvml)
    with pytest.raises(SandboxError, match="no device node"):
        lane_minors("GPU-x", available=[0], mapping=_no_nvml)
    with pytest.raises(SandboxError, match="no NVIDIA device nodes"):
        device_nodes("0", dev=_dev(tmp_path, "null"), mapping=_no_nvml)


def test_driver_libraries_bound_file_by_file(tmp_path: Path) -> None:
    lib = tmp_path / "libcuda.so.580"
    lib.write_text("")
    (tmp_path / "libcuda.so.1").symlink_to(lib.name)
    binds = driver_lib_binds({"libcuda.so.1": str(tmp_path / "libcuda.so.1")})
    assert binds == [(str(lib), "/usr/local/nvidia/lib64/libcuda.so.1")]


def _job(tmp_path: Path, **env: str) -> JobSpec:
    dirs = {k: tmp_path / k for k in ("src", "data", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(mode=0o700)
    return JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["data"],
                   out_dir=dirs["out"], tmp_dir=dirs["tmp"], limits=Limits(), env=dict(env),
                   gpu=True)


def _args(job: JobSpec, extras: JobExtras):  # type: ignore[no-untyped-def]
    def kw(**k: object) -> dict:
        return dict(k)

    return create_args(job, image_id="sha256:abc", runtime="runc", seccomp="{}",
                       settings=ContainerSettings(), user=(200001, 200001), name="n",
                       labels={}, ulimit_type=kw, mount_type=kw, log_config="none",
                       extras=extras)


def test_gpu_job_of_an_offline_image(tmp_path: Path) -> None:
    """The runtime binds are read-only at their own paths, the devices passed, the scratch
    the job's own host dir (writable, no tmpfs there), and the hardening unchanged."""
    job = _job(tmp_path, PATH="/opt/torch/bin:/usr/local/cuda/bin:/usr/bin",
               CUDA_HOME="/usr/local/cuda", CUDA_VISIBLE_DEVICES="3")
    extras = JobExtras(binds=("/usr", "/opt/torch"), devices=("/dev/nvidia3:/dev/nvidia3:rwm",),
                       host_scratch=True, host_path=("/opt/torch/bin",),
                       env=(("CUDA_VISIBLE_DEVICES", "0"),))
    container, host = _args(job, extras)
    mounts = {m["target"]: m for m in host["mounts"]}
    assert mounts["/usr"] == {"target": "/usr", "source": "/usr", "type": "bind", "read_only": True}
    assert mounts["/opt/torch"]["read_only"] is True
    assert mounts[CONTAINER_PATHS.tmp] == {"target": CONTAINER_PATHS.tmp, "source": str(job.tmp_dir),
                                           "type": "bind", "read_only": False}
    assert CONTAINER_PATHS.tmp not in host["tmpfs"]
    assert host["devices"] == ["/dev/nvidia3:/dev/nvidia3:rwm"]
    assert host["read_only"] is True and host["cap_drop"] == ["ALL"]
    assert host["network_mode"] == "none" and "device_requests" not in host
    env = container["environment"]
    assert env["PATH"].split(":")[:3] == ["/opt/venv/bin", "/opt/torch/bin", "/usr/local/cuda/bin"]
    assert env["CUDA_HOME"] == "/usr/local/cuda" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert not any(str(tmp_path) in v for v in env.values())


def test_self_contained_image_keeps_its_own_paths(tmp_path: Path) -> None:
    env = container_env(_job(tmp_path, PATH="/root/.venv/bin:/usr/bin", CUDA_HOME="/opt/cuda"))
    assert env["PATH"].split(":")[0] == "/opt/venv/bin" and "/root" not in env["PATH"]
    assert env["CUDA_HOME"] == "/usr/local/cuda"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_host_scratch_and_seeded_out_owned_by_the_job_user(tmp_path: Path) -> None:
    """The scratch dir is the job's (0700, its uid) and what the host seeded into out (a
    build handed over from the candidate's compile job) belongs to the job uid too."""
    job = _job(tmp_path)
    (job.out_dir / "build" / "k").mkdir(parents=True)
    (job.out_dir / "build" / "k" / "m.so").write_bytes(b"x")
    prepare_host_dirs(job, (200007, 200007), host_scratch=True)
    for p in (job.tmp_dir, job.out_dir, job.out_dir / "build" / "k" / "m.so"):
        assert os.stat(p).st_uid == 200007, p
    assert os.stat(job.tmp_dir).st_mode & 0o777 == 0o700
