"""The ``doctor`` report: every capability check of ``sandbox.capabilities``, the host's GPU
and CUDA tools, and which backend ``auto`` picks here, as one record (``doctor_cmd`` renders it).
"""

from __future__ import annotations

import ctypes.util
import os
import platform
import shutil
import socket
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._internal import proc
from ..errors import HarnessError
from ..sandbox import capabilities
from ..sandbox.capabilities import Check

CUDA_BIN_DIRS = ("/usr/local/cuda/bin", "/opt/nvidia/nsight-compute", "/usr/local/cuda/nsight-compute")


@dataclass(frozen=True)
class MachineReport:
    date: str
    host: str
    kernel: str
    arch: str
    python: str
    euid: int
    namespaces: dict[str, bool]
    """Each namespace type, created for real inside a new user namespace."""
    hardened_sandbox: Check
    """The process backend's full hardened launch (namespaces, mounts, uid map, seccomp)."""
    seccomp: Check
    libseccomp: str | None
    cgroups: dict[str, Any]
    docker_engine: Check
    docker_runtimes: list[str]
    docker_backend: Check
    runsc: Check
    gpu: dict[str, Any]
    cuda_in_sandbox: Check
    """CUDA and Triton inside the hardened sandbox (only tried where torch sees a GPU)."""
    tools: dict[str, str | None]
    auto_backend: str
    auto_reason: str
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _which(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in CUDA_BIN_DIRS:
        cand = Path(d) / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


def gpu_report() -> dict[str, Any]:
    smi = _which("nvidia-smi")
    gpus: list[str] = []
    if smi:
        try:
            cp = proc.run([smi, "--query-gpu=name,driver_version,memory.total",
                           "--format=csv,noheader"], 20.0)
            gpus = [ln.strip() for ln in cp.stdout.splitlines() if ln.strip()]
        except HarnessError as exc:
            gpus = [f"nvidia-smi failed: {exc}"]
    try:
        import torch

        cuda = bool(torch.cuda.is_available())
        device = torch.cuda.get_device_name(0) if cuda else None
        torch_v: str | None = str(torch.__version__)
        cuda_v = torch.version.cuda
    except ImportError:
        cuda, device, torch_v, cuda_v = False, None, None, None
    nodes = sorted(str(p) for p in Path("/dev").glob("nvidia*"))
    return {"nvidia_smi": smi, "gpus": gpus, "torch": torch_v, "torch_cuda": cuda,
            "torch_cuda_version": cuda_v, "device": device, "device_nodes": nodes}


def auto_choice() -> tuple[str, str]:
    """The backend ``auto`` resolves to, and why (same order as ``select_backend``)."""
    ns = capabilities.namespaces()
    if ns.ok:
        return "process (hardened)", "user namespaces work: " + ns.detail
    try:
        from ..sandbox.docker import DockerSandbox

        ok, why = DockerSandbox.available()
    except ImportError as exc:
        ok, why = False, str(exc)
    if ok:
        return "docker", f"no user namespaces ({ns.detail}); {why}"
    return "process (plain)", f"no user namespaces ({ns.detail}); docker: {why}"


def report() -> MachineReport:
    """Every check, run now."""
    engine, runtimes, backend, runsc = capabilities.docker_report()
    ns = capabilities.namespaces()
    gpu = gpu_report()
    cuda = capabilities.cuda_in_sandbox() if gpu["torch_cuda"] else Check(False, "no CUDA device")
    auto, why = auto_choice()
    warnings = []
    if not ns.ok:
        warnings.append(f"hardened process sandbox unavailable: {ns.detail}")
    return MachineReport(
        date=datetime.now(UTC).isoformat(timespec="seconds"), host=socket.gethostname(),
        kernel=platform.release(), arch=platform.machine(), python=sys.version.split()[0],
        euid=os.geteuid(), namespaces=capabilities.namespace_kinds(), hardened_sandbox=ns,
        seccomp=capabilities.seccomp_check(), libseccomp=ctypes.util.find_library("seccomp"),
        cgroups=capabilities.cgroup_report(), docker_engine=engine, docker_runtimes=runtimes,
        docker_backend=backend, runsc=runsc, gpu=gpu, cuda_in_sandbox=cuda,
        tools={t: _which(t) for t in ("compute-sanitizer", "ncu", "nvcc", "unshare", "bwrap")},
        auto_backend=auto, auto_reason=why, warnings=warnings,
    )
