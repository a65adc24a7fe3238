"""What the host decides for one process-backend job before its launcher starts: the
rlimits, the environment, the job cgroup, and (hardened) the namespace plan for ``_nsinit``:
uid map, hidden and covered paths, runtime paths to re-expose, job binds, devices.
"""

from __future__ import annotations

import os
import resource
import site
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._internal.worker_env import worker_env
from ..errors import SandboxError
from . import cgroups
from .interface import JobPaths, JobSpec

MB = 1024 * 1024
INNER_ROOT = "/tmp/shx"  # noqa: S108 - inside the sandbox: a private tmpfs, not the host /tmp
INNER_UID = 1000
SANDBOX_UID_BASE = 1_600_000_000
"""As host root each job runs as a fresh host uid from here (no files, no processes)."""
COVERED = ("/tmp", "/var/tmp", "/root", "/home", "/run", "/dev/shm")  # noqa: S108
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
"""The worker's /dev is a fresh tmpfs with only these (plus the NVIDIA nodes for GPU jobs)."""


def _rlimits(job: JobSpec, memory_cgroup: bool) -> list[tuple[int, int]]:
    lim = job.limits
    out = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, lim.max_open_files),
        (resource.RLIMIT_FSIZE, lim.max_file_size_mb * MB),
        (resource.RLIMIT_CPU, lim.cpu_time_s),
        # a little above the pids cgroup (max_processes + launcher and init), so that where
        # the cgroup exists it bites first and its refusals are counted (limit_hit="pids")
        (resource.RLIMIT_NPROC, lim.max_processes + 4),
    ]
    # CUDA reserves vast address space, so never RLIMIT_AS on GPU jobs; where a memory
    # cgroup is in force it is the accurate limit (resident memory, whole process tree).
    if not job.gpu and not memory_cgroup:
        out.append((resource.RLIMIT_AS, lim.memory_mb * MB))
    return out


def _runtime_paths() -> list[str]:
    """What the worker's interpreter needs to see: prefixes, site-packages, this package."""
    pkg_root = Path(__file__).resolve().parents[2]
    cands = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             str(Path(os.path.realpath(sys.executable)).parent.parent), str(pkg_root),
             *site.getsitepackages()]
    real = sorted({os.path.realpath(p) for p in cands if os.path.exists(p)})
    return [p for p in real if not any(p.startswith(q.rstrip("/") + "/") for q in real
                                       if q != p)]


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _chown_tree(top: Path, uid: int) -> None:
    os.chown(top, uid, uid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


@dataclass(frozen=True)
class LaunchSettings:
    """What a launch takes from its backend: configuration only, nothing the backend owns."""

    hardened: bool
    hidden_paths: tuple[Path, ...] = ()
    seccomp_filter: bytes | None = None
    cgroup_support: cgroups.CgroupSupport | None = None
    """None: no job cgroup (the backend was told not to use cgroups)."""
    out_quota_mb: int = 4096
    out_max_entries: int = 2_000


class Launch:
    """Everything the host decides for one job before the launcher starts.

    What the owner should know comes back as attributes, not calls into it: ``notes``
    (warnings for the verdict) and ``job_uid`` (as host root, the fresh uid the job runs as).
    """

    def __init__(self, settings: LaunchSettings, job: JobSpec,
                 argv: list[str] | None = None) -> None:
        self.job = job
        self.namespaced = settings.hardened
        self.notes: list[str] = []
        self.job_uid: int | None = None
        if self.namespaced:
            inner = {k: f"{INNER_ROOT}/{k}" for k in ("src", "data", "out", "tmp")}
            self.paths = JobPaths(**inner)
            env_job = replace(job, tmp_dir=Path(inner["tmp"]))
        else:
            self.paths = JobPaths(src=str(job.src_dir), data=str(job.data_dir),
                                  out=str(job.out_dir), tmp=str(job.tmp_dir))
            env_job = job
        ns = self._namespaces(settings) if self.namespaced else None  # may refuse: before cgroups
        env = worker_env(env_job)
        env.setdefault("USER", "sandbox")
        env.setdefault("LOGNAME", "sandbox")
        # the cgroup last: nothing after it may fail, so no cgroup outlives a refused launch
        self.cgroup: cgroups.JobCgroup | None = None
        if settings.cgroup_support is not None and settings.cgroup_support.by_controller:
            try:
                self.cgroup = cgroups.create(job.role, job.limits.memory_mb,
                                             job.limits.max_processes + 2,
                                             settings.cgroup_support)
            except OSError as exc:
                self.notes.append(f"cgroups: could not create the job's cgroup ({exc}); "
                             "memory and process limits are rlimits only")
        memcg = self.cgroup is not None and "memory" in self.cgroup.dirs
        if job.gpu and not memcg:
            self.notes.append("GPU job without a memory cgroup: host memory is not limited "
                         "(RLIMIT_AS would break CUDA)")
        self.out_quota = (settings.out_quota_mb * MB, settings.out_max_entries)
        self.config: dict[str, Any] = {
            "argv": argv or [sys.executable, "-I", "-m", "sandboxharness.worker"],
            "env": env,
            "cwd": self.paths.tmp,
            "cgroups": self.cgroup.procs_files if self.cgroup else [],
            "rlimits": _rlimits(job, memcg),
            "no_new_privs": True,
            "seccomp": settings.seccomp_filter.hex() if settings.seccomp_filter else None,
            "ns": ns,
        }

    def _namespaces(self, settings: LaunchSettings) -> dict[str, Any]:
        job = self.job
        dirs = [os.path.realpath(p) for p in (job.src_dir, job.out_dir, job.tmp_dir)]
        job_root = os.path.commonpath(dirs)
        expose = _runtime_paths()
        if job.gpu and os.path.isdir("/run/nvidia-persistenced"):
            expose.append("/run/nvidia-persistenced")
        # The job's own host dirs (bound at INNER_ROOT instead); for the pipeline's layout
        # (<workdir>/shx-job-*/<role>/...) also the job root (the other role's files) and
        # the workdir (other jobs), unless that would hide what the worker must see.
        hide = [job_root]
        parent = Path(job_root).parent
        if parent.name.startswith("shx-job-"):
            hide.append(str(parent))
            # (the job's dirs, data included, are bound from fds opened before any hiding,
            # so only the runtime paths, which stay where they are, must remain visible)
            workdir = str(parent.parent)
            if (workdir not in ("/", os.path.realpath(job.data_dir))
                    and not any(_under(p, workdir) for p in expose)):
                hide.append(workdir)
        hide += [os.path.realpath(p) for p in settings.hidden_paths]
        for path in expose:
            for hidden in settings.hidden_paths:
                if _under(path, os.path.realpath(hidden)):
                    raise SandboxError(f"hidden path {hidden} contains {path}, which the "
                                       "worker's Python runtime needs")
        if os.geteuid() == 0:
            uid = SANDBOX_UID_BASE + int.from_bytes(os.urandom(3), "big")
            self.job_uid = uid
            for d in (job.src_dir, job.out_dir, job.tmp_dir):
                _chown_tree(Path(d), uid)
            ids = {"uid_mode": "root", "outer_uid": uid, "outer_gid": uid}
        else:
            ids = {"uid_mode": "self", "outer_uid": os.geteuid(), "outer_gid": os.getegid()}
        devices = [d for d in DEVICES if os.path.exists(d)]
        if job.gpu:
            devices += sorted(str(p) for p in Path("/dev").glob("nvidia*")
                              if not p.is_dir())
            devices += sorted(str(p) for p in Path("/dev").glob("nvidia-caps/*"))
        lim = job.limits
        return {
            **ids, "inner_uid": INNER_UID, "inner_gid": INNER_UID, "hostname": "sandbox",
            "hide": sorted(set(hide)), "cover": list(COVERED), "expose": expose,
            "devices": devices,
            "binds": [
                {"src": os.path.realpath(job.src_dir), "dst": self.paths.src, "rw": False},
                {"src": os.path.realpath(job.data_dir), "dst": self.paths.data, "rw": False},
                {"src": os.path.realpath(job.out_dir), "dst": self.paths.out, "rw": True},
            ],
            "scratch": {"dst": self.paths.tmp, "size_mb": min(lim.memory_mb, 2048),
                        "inodes": 32768},
            "shm_mb": min(lim.memory_mb, 256),
            "oom_score_adj": 1000,
        }
