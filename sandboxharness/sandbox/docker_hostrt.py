"""The host runtime an offline worker image borrows: what to bind read-only, found on the host.

Where no registry is reachable (the GPU machine), the worker image is a skeleton (mount
points and links, see docker_image) and its runtime — the Python interpreter, torch, triton,
the CUDA toolkit, compute-sanitizer, ncu, the driver's libraries — is bind-mounted read-only
from the host at the very paths it has there, so every absolute path baked into a venv, an
``ld.so.cache`` entry or an ``/etc/alternatives`` link still resolves inside the container.

This module only finds those paths (no engine needed): ``discover`` returns a
:class:`HostRuntime`, recorded in the image's labels and, from there, in every verdict.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ..errors import SandboxError

WORKER_MODULES = ("torch", "triton", "numpy", "safetensors", "tvm_ffi", "cupti", "ninja")
"""What the worker may import beyond the standard library (each found where the host has it)."""
GPU_TOOLS = ("nvcc", "compute-sanitizer", "ncu")
DRIVER_LIBS = ("libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1",
               "libnvidia-nvvm.so.4", "libcudadebugger.so.1", "libnvidia-gpucomp.so")
"""The user-space driver: CUDA, NVML, the PTX JIT, NVVM, the debugger API compute-sanitizer
uses. Found through ``ldconfig -p`` (the same cache the container gets)."""
ETC_PATHS = ("/etc/ld.so.cache", "/etc/alternatives")
"""Triton runs ``ldconfig -p`` to find libcuda; ``/usr/local/cuda`` points through alternatives."""
ROOT_LINKS = ("bin", "lib", "lib32", "lib64", "libx32")
"""Top-level links copied as they are. Not /sbin: Docker mounts its init at /sbin/docker-init,
which must land in the image's own /sbin, not inside the read-only /usr bind (there it would
vanish under it): the image's /sbin is a directory of links to the host's sbin entries."""
PSEUDO_FS = {"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "mqueue", "debugfs",
             "tracefs", "securityfs", "pstore", "bpf", "autofs", "fusectl", "configfs",
             "hugetlbfs", "binfmt_misc", "nsfs"}


@dataclass(frozen=True)
class HostRuntime:
    """What an offline image takes from its host, all read-only, each at its own path."""

    python: str
    """The host interpreter (as found, not resolved): the image's venv links to it."""
    python_home: str
    """Directory of the real base interpreter: ``home`` of the image's pyvenv.cfg."""
    python_version: str
    site_dirs: tuple[str, ...]
    """Host site directories the worker's imports come from, in sys.path order."""
    binds: tuple[str, ...]
    """Host paths bound read-only at the same path (no one inside another)."""
    root_links: tuple[tuple[str, str], ...]
    """Top-level links of the host root (``lib -> usr/lib``), copied into the image."""
    path_dirs: tuple[str, ...]
    """Host directories for the container's PATH (the venv's bin, the CUDA tools)."""
    sbin: tuple[str, ...] = ()
    """Absolute host paths of the sbin entries (``ldconfig``: Triton runs /sbin/ldconfig),
    linked from the image's own /sbin."""
    missing: tuple[str, ...] = ()
    """Modules, tools or libraries asked for and not found on this host."""


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def collapse(paths: list[str]) -> list[str]:
    """Sorted absolute paths with every one inside another dropped."""
    kept: list[str] = []
    for p in sorted({os.path.normpath(p) for p in paths}):
        if not _under(p, kept):
            kept.append(p)
    return kept


def ldconfig_paths(names: tuple[str, ...] = DRIVER_LIBS) -> dict[str, str]:
    """name -> path for each library in the host's loader cache (first 64-bit entry)."""
    exe = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        text = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=20,  # noqa: S603
                              check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, _, rest = line.strip().partition(" (")
        if name in names and name not in found and "=>" in rest and "x86-64" in rest:
            found[name] = rest.split("=>", 1)[1].strip()
    return found


def submounts(roots: list[str], mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """Real mounts strictly inside ``roots``: bound again explicitly, so that read-only holds
    for them too (a recursive bind makes only its top mount read-only on older engines)."""
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, fstype = left.split(), (right.split() or ["?"])[0]
        if len(fields) < 5 or fstype in PSEUDO_FS:
            continue
        point = fields[4].replace("\\040", " ")
        if any(point.startswith(r.rstrip("/") + "/") for r in roots):
            found.append(point)
    return sorted(set(found))


def _module_site(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return str(Path(list(spec.submodule_search_locations)[0]).parent)
    return str(Path(spec.origin).parent) if spec.origin else None


def _tool_dirs(name: str) -> list[str]:
    exe = shutil.which(name)
    if exe is None:  # not on PATH: the toolkit's own bin (CUDA_HOME, else the default)
        home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
        cand = Path(home, "bin", name)
        exe = str(cand) if cand.exists() else None
    if exe is None:
        return []
    return sorted({str(Path(exe).parent), str(Path(exe).resolve().parent)})


def nsight_dirs(ncu_dirs: list[str], opt: str = "/opt/nvidia/nsight-compute") -> list[str]:
    """Where ncu's launcher finds the tool itself: an ``nsight-compute*`` directory beside the
    toolkit's bin, or under /opt/nvidia (on the H200 the launcher alone was bound and refused:
    "nsight-compute directory is not found")."""
    found: list[str] = []
    for d in ncu_dirs:
        for cand in sorted(Path(d).parent.glob("nsight-compute*")):
            found += [str(cand), str(cand.resolve())]
    if Path(opt).is_dir():
        found += [opt, str(Path(opt).resolve())]
    return list(dict.fromkeys(found))


def discover(*, gpu: bool, forbidden: tuple[str, ...] = ()) -> HostRuntime:
    """The runtime of this interpreter (``sys.executable``) as an offline image needs it.

    ``gpu``: also the CUDA tools and driver libraries (missing ones are listed, not fatal:
    the stage that needs one says so). ``forbidden``: host paths no bind may contain or reveal
    (the harness's own tree, job roots, keys): a bind that is one of them or holds one is refused.
    """
    base_exe = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    binds = ["/usr", sys.prefix, sys.base_prefix, str(base_exe.parent),
             sysconfig.get_paths()["stdlib"]]
    site_dirs, missing = [], []
    for name in WORKER_MODULES:
        where = _module_site(name)
        if where is None:
            missing.append(name)
        elif where not in site_dirs:
            site_dirs.append(where)
    binds += site_dirs
    path_dirs = [str(Path(sys.executable).parent)]
    if gpu:
        for tool in GPU_TOOLS:
            dirs = _tool_dirs(tool)
            binds += dirs + (nsight_dirs(dirs) if tool == "ncu" else [])
            path_dirs += [d for d in dirs[:1] if d not in path_dirs]
            if not dirs:
                missing.append(tool)
        libs = ldconfig_paths()
        missing += [n for n in DRIVER_LIBS if n not in libs and n != "libnvidia-gpucomp.so"]
        for path in libs.values():
            binds += [str(Path(path).parent), str(Path(path).resolve().parent)]
        cupti = os.environ.get("SHX_CUPTI_LIB_DIR")
        if cupti and Path(cupti).is_dir():
            binds += [cupti, str(Path(cupti).resolve())]
    links: list[tuple[str, str]] = []
    for name in ROOT_LINKS:
        p = Path("/", name)
        if p.is_symlink():
            links.append((name, os.readlink(p)))
        elif p.is_dir():
            binds.append(str(p))
    binds += [p for p in ETC_PATHS if os.path.exists(p)]
    kept = collapse([b for b in binds if os.path.exists(b)])
    sbin_dir = os.path.realpath("/sbin")
    sbin = sorted(f"{sbin_dir}/{n}" for n in os.listdir(sbin_dir)) if _under(sbin_dir, kept) else []
    kept = kept + [m for m in submounts(kept) if m not in kept]
    for b in kept:
        for f in forbidden:
            if _under(os.path.normpath(f), [b]):
                raise SandboxError(f"offline image: host path {b} would be bound into every "
                                   f"container and it holds {f} (hidden from the worker): "
                                   "move the runtime or the harness")
    return HostRuntime(
        python=sys.executable, python_home=str(base_exe.parent),
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
        site_dirs=tuple(site_dirs), binds=tuple(kept), root_links=tuple(links),
        path_dirs=tuple(path_dirs), sbin=tuple(sbin), missing=tuple(missing))
