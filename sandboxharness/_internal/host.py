"""The host the evaluation ran on (versions, platform, device), for the verdict's
``environment`` (reproducibility, audit). The worker's environment variables are
``worker_env``."""

from __future__ import annotations

import hashlib
import platform
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path


def version_of(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def device_name() -> str:
    """``cpu`` or the first CUDA device's name (probed in the host; no kernel runs here)."""
    import torch

    if torch.cuda.is_available():
        return str(torch.cuda.get_device_name(0))
    return "cpu"


@lru_cache(maxsize=1)
def harness_version() -> str:
    """The installed version; for a source tree not installed (a device checkout on a .pth),
    ``0+src.<digest of the package's .py files>``: resume keys by it, so a changed harness
    never reuses another's traces."""
    return version_of("sandboxharness") or f"0+src.{source_digest()[:12]}"


def source_digest() -> str:
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(f"{path.relative_to(root).as_posix()}\0".encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def describe() -> dict[str, str | None]:
    return {
        "harness_version": harness_version(),
        "python": sys.version.split()[0],
        "torch": version_of("torch") or "missing",
        "triton": version_of("triton"),
        "platform": f"{platform.system()}-{platform.release()}-{platform.machine()}",
        "device": device_name(),
    }
