"""The host the evaluation ran on (versions, platform, device), for the verdict's
``environment`` (reproducibility, audit). The worker's environment variables are
``worker_env``."""

from __future__ import annotations

import platform
import sys
from functools import lru_cache
from importlib import metadata


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


def harness_version() -> str:
    return version_of("sandboxharness") or "0+unknown"


def describe() -> dict[str, str | None]:
    return {
        "harness_version": harness_version(),
        "python": sys.version.split()[0],
        "torch": version_of("torch") or "missing",
        "triton": version_of("triton"),
        "platform": f"{platform.system()}-{platform.release()}-{platform.machine()}",
        "device": device_name(),
    }
