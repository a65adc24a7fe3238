"""The offline image's pieces that need no engine: what of the host it binds, and what its
skeleton root holds (mount points, links and the worker's own sources, nothing else)."""

from __future__ import annotations

import io
import json
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from sandboxharness.errors import SandboxError
from sandboxharness.sandbox.docker_config import WORKER_LABEL, worker_sha256
from sandboxharness.sandbox.docker_hostrt import HostRuntime, collapse, discover, submounts
from sandboxharness.sandbox.docker_image import BINDS_LABEL, KIND_LABEL, image_binds, labels, skeleton

REPO = Path(__file__).resolve().parents[2]


def test_collapse_keeps_only_outermost_paths() -> None:
    assert collapse(["/usr/local/cuda", "/usr", "/opt/a/b", "/opt/a", "/opt/ab"]) == [
        "/opt/a", "/opt/ab", "/usr"]


def test_submounts_inside_binds_are_bound_again(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(
        "22 1 0:1 / / rw - ext4 /dev/vda rw\n"
        "30 22 0:2 / /usr/local/nvidia ro - ext4 /dev/vdb ro\n"
        "31 22 0:3 / /usr/x proc rw - proc proc rw\n"
        "32 22 0:4 / /opt/other rw - ext4 /dev/vdc rw\n")
    assert submounts(["/usr"], str(info)) == ["/usr/local/nvidia"]


def test_discover_binds_this_interpreter_and_its_libraries() -> None:
    rt = discover(gpu=False, forbidden=(str(REPO / "sandboxharness"), tempfile.gettempdir()))
    assert "/usr" in rt.binds and rt.python == sys.executable
    assert any(sys.prefix == b or sys.prefix.startswith(b + "/") for b in rt.binds)
    import torch

    torch_site = str(Path(torch.__file__).parents[1])
    assert torch_site in rt.site_dirs
    assert not any(b == "/" or b == tempfile.gettempdir() for b in rt.binds)
    assert not any(str(REPO / "sandboxharness").startswith(b.rstrip("/") + "/") for b in rt.binds)


def test_discover_refuses_a_bind_holding_a_hidden_path() -> None:
    with pytest.raises(SandboxError, match="would be bound"):
        discover(gpu=False, forbidden=(sys.prefix + "/secret-keys",))


def _rt(**over: object) -> HostRuntime:
    base = dict(python="/opt/py/bin/python3", python_home="/opt/py/bin", python_version="3.11",
                site_dirs=("/opt/py/lib/python3.11/site-packages",),
                binds=("/etc/ld.so.cache", sys.base_prefix, "/usr", "/usr/local/nvidia"),
                root_links=(("lib", "usr/lib"), ("bin", "usr/bin")),
                path_dirs=("/opt/py/bin",), sbin=("/usr/sbin/ldconfig",))
    base.update(over)
    return HostRuntime(**base)  # type: ignore[arg-type]


def test_skeleton_holds_mount_points_links_and_the_worker_only() -> None:
    tar = tarfile.open(fileobj=io.BytesIO(skeleton(_rt())))
    members = {m.name: m for m in tar.getmembers()}
    files = {n: m for n, m in members.items() if m.isfile()}
    venv_site = "opt/venv/lib/python3.11/site-packages/"
    for name, m in files.items():  # every regular file: the venv's own, or an empty mount point
        assert name.startswith(("opt/venv/", "sbin/docker-init", "etc/ld.so.cache")), name
        if not name.startswith(venv_site + "sandboxharness/"):
            assert m.size < 1024, name
    assert members["etc/ld.so.cache"].size == 0 and members["usr"].isdir()
    assert members[sys.base_prefix.lstrip("/")].isdir()  # a mount point as the host has it
    assert "usr/local" not in members  # a submount: inside the /usr bind already
    assert members["lib"].issym() and members["lib"].linkname == "usr/lib"
    assert members["sbin"].isdir() and members["sbin/ldconfig"].linkname == "/usr/sbin/ldconfig"
    assert members["opt/venv/bin/python3"].linkname == "/opt/py/bin/python3"
    cfg = tar.extractfile("opt/venv/pyvenv.cfg").read().decode()  # type: ignore[union-attr]
    assert "home = /opt/py/bin" in cfg and "include-system-site-packages = false" in cfg
    pth = tar.extractfile(venv_site + "zz-host-runtime.pth").read().decode()  # type: ignore[union-attr]
    assert "site.addsitedir('/opt/py/lib/python3.11/site-packages')" in pth
    shipped = {n.removeprefix(venv_site + "sandboxharness/") for n in files
               if n.startswith(venv_site + "sandboxharness/")}
    assert shipped - {"__init__.py"}  # the stub package root, then only these two packages
    assert all(n.startswith(("worker/", "inputs/")) for n in shipped - {"__init__.py"})
    for d in ("job/src", "job/data", "job/out", "job/tmp", "tmp", "dev", "proc"):
        assert members[d].isdir()


def test_skeleton_refuses_a_bind_over_its_venv_or_job_dirs() -> None:
    for bad in ("/opt", "/job", "/opt/venv"):
        with pytest.raises(SandboxError, match="would hide"):
            skeleton(_rt(binds=("/usr", bad)))


def test_labels_carry_the_worker_hash_and_the_binds() -> None:
    rt = _rt()
    lab = labels(rt)
    assert lab[WORKER_LABEL] == worker_sha256() and lab[KIND_LABEL] == "host-runtime"
    assert json.loads(lab[BINDS_LABEL]) == list(rt.binds)


def test_image_labels_read_back_and_checked_on_this_host(tmp_path: Path) -> None:
    here = [str(tmp_path)]
    attrs = {"Config": {"Labels": {KIND_LABEL: "host-runtime", BINDS_LABEL: json.dumps(here)}}}
    assert image_binds(attrs) == ("host-runtime", here, [])
    assert image_binds({"Config": {"Labels": {}}}) == ("", [], [])
    gone = {"Config": {"Labels": {KIND_LABEL: "host-runtime",
                                  BINDS_LABEL: json.dumps([str(tmp_path / "gone")])}}}
    with pytest.raises(SandboxError, match="lacks"):
        image_binds(gone)


def test_ncu_launcher_brings_its_nsight_compute_directory(tmp_path: Path) -> None:
    """ncu is a launcher script: binding its bin alone left it refusing inside the container
    on the H200. The nsight-compute directory beside the toolkit and /opt/nvidia's are bound."""
    from sandboxharness.sandbox.docker_hostrt import nsight_dirs

    cuda = tmp_path / "cuda-13.0"
    (cuda / "bin").mkdir(parents=True)
    real = tmp_path / "opt" / "nsight-compute" / "2025.3.1"
    real.mkdir(parents=True)
    (cuda / "nsight-compute-2025.3.1").symlink_to(real)
    found = nsight_dirs([str(cuda / "bin")], opt=str(tmp_path / "opt" / "nsight-compute"))
    assert str(cuda / "nsight-compute-2025.3.1") in found and str(real) in found
    assert str(tmp_path / "opt" / "nsight-compute") in found
    assert nsight_dirs([str(tmp_path / "none" / "bin")], opt=str(tmp_path / "missing")) == []
