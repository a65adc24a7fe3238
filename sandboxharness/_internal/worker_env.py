"""The worker's environment variables and PATH: built from nothing, never inherited from the
host. What the host itself is (for the verdict) is ``host``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..sandbox.interface import JobSpec

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


def worker_env(job: JobSpec) -> dict[str, str]:
    tmp = str(job.tmp_dir)
    env = {
        "PATH": BASE_PATH,
        "HOME": tmp,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TRITON_CACHE_DIR": f"{tmp}/triton-cache",
        "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor-cache",
        "XDG_CACHE_HOME": f"{tmp}/cache",
    }
    env.update(job.env)
    return env
