"""Host side of native (CUDA/C++) builds: the toolchain environment a GPU job gets, the build
cache hand-over between one candidate's own jobs, and a summary of the compiler's output.

The build itself runs inside the sandbox (``worker.gpu.load_native``, in the hello op, under
the compile timeout). Everything read back here was written by the sandbox: size-capped,
no symlinks followed, parsed as text and never executed on the trusted side.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from .._internal.worker_env import BASE_PATH
from ..worker.protocol import BUILD_ROOT, COMPILE_LOG

MAX_LOG_BYTES = 256 * 1024
MAX_ARTIFACT_BYTES = 512 * 1024 * 1024

_REGS = re.compile(r"Function properties for (\S+)|Compiling entry function '([^']+)'|"
                   r"Used (\d+) registers(?:.*?(\d+) bytes smem)?|"
                   r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_WARN = re.compile(r"\bwarning( #\d+(-D)?)? ?:", re.IGNORECASE)
_ERR = re.compile(r"\berror( #\d+(-D)?)? ?:", re.IGNORECASE)


@lru_cache(maxsize=1)
def cuda_home() -> str | None:
    """The CUDA toolkit the host sees (``CUDA_HOME``, then ``nvcc`` on PATH, then the default)."""
    for cand in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if cand and Path(cand, "bin", "nvcc").is_file():
            return cand
    nvcc = shutil.which("nvcc")
    if nvcc:
        return str(Path(nvcc).resolve().parent.parent)
    return "/usr/local/cuda" if Path("/usr/local/cuda/bin/nvcc").is_file() else None


def gpu_env() -> dict[str, str]:
    """Extra environment of a GPU job: where nvcc and ninja are; nothing from the host's env."""
    dirs = [str(Path(sys.executable).parent)]
    home = cuda_home()
    env: dict[str, str] = {"MAX_JOBS": "4"}
    if home:
        dirs.append(str(Path(home) / "bin"))
        env["CUDA_HOME"] = home
    env["PATH"] = ":".join([*dirs, BASE_PATH])
    lib = cupti_lib_dir()
    if lib:  # cupti-python dlopens plain "libcupti.so"; without it the timer falls back
        env["LD_LIBRARY_PATH"] = lib
    return env


@lru_cache(maxsize=1)
def cupti_lib_dir() -> str | None:
    """A directory holding an unversioned ``libcupti.so`` (what cupti-python loads):
    ``SHX_CUPTI_LIB_DIR``, else the toolkit's ``extras/CUPTI/lib64``, else None."""
    home = cuda_home()
    for cand in (os.environ.get("SHX_CUPTI_LIB_DIR"),
                 str(Path(home) / "extras" / "CUPTI" / "lib64") if home else None):
        if cand and Path(cand, "libcupti.so").exists():
            return str(Path(cand).resolve())
    return None


def read_capped(path: Path, cap: int = MAX_LOG_BYTES) -> str | None:
    """Last ``cap`` bytes of a regular file the sandbox wrote (never through a symlink)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > cap:
            os.lseek(fd, st.st_size - cap, os.SEEK_SET)
        data = os.read(fd, cap)
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def build_dir(job_out: Path, build_key: str) -> Path:
    """Where a job's worker leaves its build artifacts (the ``.so`` and the compiler log)."""
    return job_out / BUILD_ROOT / build_key.removeprefix("sha256:")[:24]


def hand_over(src_out: Path, dst_out: Path, build_key: str) -> bool:
    """Seed a later job of the SAME candidate with the shared object its first job built.

    Only regular ``.so`` files move (no symlinks, size-capped). The cache never crosses
    candidates: it is keyed by this candidate's content hash and lives in its own job dirs.
    """
    src, dst = build_dir(src_out, build_key), build_dir(dst_out, build_key)
    if not src.is_dir() or src.is_symlink():
        return False
    moved = False
    for entry in os.scandir(src):
        if not entry.name.endswith(".so") or not entry.is_file(follow_symlinks=False):
            continue
        if entry.stat(follow_symlinks=False).st_size > MAX_ARTIFACT_BYTES:
            continue
        dst.mkdir(parents=True, exist_ok=True)
        fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            with os.fdopen(fd, "rb") as fin, open(dst / entry.name, "wb") as fout:
                shutil.copyfileobj(fin, fout)
        except OSError:
            continue
        moved = True
    return moved


def summarize(job_out: Path, build_key: str, build: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the compile stage records about a native build: counts, resources, the log's tail."""
    text = read_capped(build_dir(job_out, build_key) / COMPILE_LOG)
    out: dict[str, Any] = {"native": True}
    if build:
        out["build"] = {k: build[k] for k in ("binding", "arch", "cached", "build_s", "flags")
                        if k in build}
    if text is None:
        out["compiler_log"] = "absent (taken from cache, or the build never started)"
        return out
    lines = text.splitlines()
    out["warnings"] = sum(1 for ln in lines if _WARN.search(ln))
    out["errors"] = sum(1 for ln in lines if _ERR.search(ln))
    kernels: dict[str, dict[str, int]] = {}
    current = None
    for ln in lines:
        for m in _REGS.finditer(ln):
            if m.group(1) or m.group(2):
                current = (m.group(1) or m.group(2))[:120]
                kernels.setdefault(current, {})
            elif m.group(3) and current is not None:
                kernels[current]["registers"] = int(m.group(3))
                if m.group(4):
                    kernels[current]["smem_bytes"] = int(m.group(4))
            elif m.group(5) and current is not None:
                kernels[current].update(stack_bytes=int(m.group(5)),
                                        spill_store_bytes=int(m.group(6)),
                                        spill_load_bytes=int(m.group(7)))
    out["kernels"] = dict(list(kernels.items())[:32])
    out["log_tail"] = "\n".join(lines[-40:])[-4000:]
    return out
