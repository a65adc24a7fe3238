"""What a worker container looks like: pure functions from a JobSpec to Docker's create
arguments, the seccomp profile, and the host-side preparation of the bind-mounted dirs.

Kept apart from the engine calls (docker.py) so the hardening is readable in one place and
testable without an engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._internal.shipped import DOCKER_SECCOMP, shipped_file
from .._internal.worker_env import worker_env
from ..errors import SandboxError
from .interface import JobPaths, JobSpec

MB = 1024 * 1024
LABEL = "sandboxharness.job"
DEFAULT_IMAGE = "sandboxharness-worker:cpu"
IMAGE_ENV = "SANDBOXHARNESS_DOCKER_IMAGE"
SECCOMP_ENV = "SANDBOXHARNESS_DOCKER_SECCOMP"
WORKER_LABEL = "sandboxharness.worker-sha256"
CONTAINER_PATH = "/opt/venv/bin:/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin"
CONTAINER_CUDA_HOME = "/usr/local/cuda"
WORKER_ARGV = ["/opt/venv/bin/python3", "-I", "-m", "sandboxharness.worker"]
CONTAINER_PATHS = JobPaths(src="/job/src", data="/job/data", out="/job/out", tmp="/job/tmp")


JOB_UID_BASE, JOB_UID_SPAN = 200_000, 50_000


@dataclass(frozen=True)
class ContainerSettings:
    """Per-backend knobs that are not in the policy's Limits."""

    user: tuple[int, int] | None = None
    """Fixed uid:gid; None: a fresh unprivileged uid per job (so RLIMIT_NPROC, which the
    kernel counts per host uid, is not shared between concurrent jobs, and no two jobs'
    files share an owner)."""
    cpus: float = 1.0
    tmpfs_mb: int = 1024
    shm_mb: int = 64
    out_quota_mb: int = 4096
    """Bytes the job may leave in its out dir (all results together), enforced by a watchdog."""
    out_max_entries: int = 2_000

    def job_user(self) -> tuple[int, int]:
        if self.user is not None:
            return self.user
        uid = JOB_UID_BASE + secrets.randbelow(JOB_UID_SPAN)
        return uid, uid


@dataclass(frozen=True)
class JobExtras:
    """What one job adds to the container beyond the common hardening (GPU, offline image)."""

    binds: tuple[str, ...] = ()
    """Host paths bound read-only at the same path (an offline image's runtime)."""
    file_binds: tuple[tuple[str, str], ...] = ()
    """(host path, container path), read-only (driver libraries for a self-contained image)."""
    devices: tuple[str, ...] = ()
    """Docker device entries ``host:container:rwm`` (the lane's GPU and the control nodes)."""
    host_scratch: bool = False
    """/job/tmp is the job's own host tmp dir (owned by the job uid, exec allowed), not a
    tmpfs: Docker's tmpfs comes up root-owned and noexec on some engines, and GPU jobs
    compile and load shared objects there."""
    host_path: tuple[str, ...] | None = None
    """PATH dirs of an image that borrows the host's runtime (see container_env)."""
    env: tuple[tuple[str, str], ...] = ()
    """Environment the job's GPU placement changes (CUDA_VISIBLE_DEVICES renumbered)."""
    device_request: Any | None = None
    """The NVIDIA runtime's device request (self-contained images where it is registered)."""


def load_seccomp(path: Path | None = None) -> str:
    """The profile as the compact JSON Docker's API expects (``x-`` keys are documentation)."""
    path = path or Path(os.environ.get(SECCOMP_ENV) or shipped_file(DOCKER_SECCOMP))
    try:
        profile = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SandboxError(f"seccomp profile {path} unreadable: {exc}") from None
    if not isinstance(profile, dict) or profile.get("defaultAction") != "SCMP_ACT_ERRNO":
        raise SandboxError(f"seccomp profile {path} must deny by default (SCMP_ACT_ERRNO)")
    clean = {k: v for k, v in profile.items() if not k.startswith("x-")}
    return json.dumps(clean, separators=(",", ":"), sort_keys=True)


IMAGE_PACKAGES = ("worker", "inputs")
"""What the image ships of the harness: the worker and the input generator it shares."""


def worker_sha256(root: Path | None = None) -> str:
    """Hash of the image's packages' sources, computed exactly as containers/worker_sha.sh
    does (``find worker inputs -name '*.py' | sort | xargs sha256sum | sha256sum``) and stored
    as the image label WORKER_LABEL: an image built from other sources is refused."""
    root = root or Path(__file__).resolve().parents[1]
    files = [p.relative_to(root).as_posix() for pkg in IMAGE_PACKAGES
             for p in (root / pkg).rglob("*.py")]
    lines = [f"{hashlib.sha256((root / rel).read_bytes()).hexdigest()}  {rel}\n"
             for rel in sorted(files)]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def container_env(job: JobSpec, host_path: list[str] | None = None,
                  overrides: dict[str, str] | None = None) -> dict[str, str]:
    """worker_env with the host's job paths replaced by the container's.

    ``host_path``: the image borrows the host's runtime at the host's own paths (an offline
    image), so host tool locations stay valid: PATH is the image's venv, those dirs, then the
    job's own PATH. None: a self-contained image, whose own locations replace the host's.
    """
    env = worker_env(replace(job, tmp_dir=Path(CONTAINER_PATHS.tmp)))
    # the job uid has no passwd entry: getpass.getuser() (torch, triton) reads these first
    env.setdefault("USER", "sandbox")
    env.setdefault("LOGNAME", "sandbox")
    if host_path is None:  # host tool locations mean nothing in the image: use its own
        env["PATH"] = CONTAINER_PATH
        if "CUDA_HOME" in env:
            env["CUDA_HOME"] = CONTAINER_CUDA_HOME
    else:
        dirs = ["/opt/venv/bin", *host_path, *env["PATH"].split(":")]
        env["PATH"] = ":".join(dict.fromkeys(d for d in dirs if d))
    env.update(overrides or {})
    swaps = [(str(job.src_dir), CONTAINER_PATHS.src), (str(job.data_dir), CONTAINER_PATHS.data),
             (str(job.out_dir), CONTAINER_PATHS.out), (str(job.tmp_dir), CONTAINER_PATHS.tmp)]
    out = {}
    for key, value in env.items():
        for host, inside in swaps:
            if value == host or value.startswith(host + "/"):
                value = inside + value[len(host):]
        out[key] = value
    return out


def prepare_host_dirs(job: JobSpec, user: tuple[int, int], host_scratch: bool = False) -> None:
    """Let the container user read src and write out (and tmp, with ``host_scratch``), and
    nothing more.

    out: owned by the container user, 0700. src: group = the container user's group, dirs
    0750, files 0640, so it can read but not modify. Falls back to world-readable/-writable
    modes when the harness is not root (the job root above stays 0700, private to the host user).
    """
    uid, gid = user
    owned = [job.out_dir, *([job.tmp_dir] if host_scratch else [])]
    for d in (job.src_dir, job.data_dir, *owned):
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode):
            raise SandboxError(f"job directory {d} is not a directory (or is a symlink)")
    try:
        for d in owned:
            os.chown(d, uid, gid)
            os.chmod(d, 0o700)
        for path, _, _ in _walk(job.out_dir)[1:]:  # what the host seeded (a build hand-over)
            os.lchown(path, uid, gid)
        for path, dir_mode, file_mode in _walk(job.src_dir):
            os.lchown(path, -1, gid)
            os.chmod(path, dir_mode if path.is_dir() else file_mode)
    except PermissionError:
        for d in owned:
            os.chmod(d, 0o777)  # noqa: S103  (under the host's private 0700 job root)
        for path, _, _ in _walk(job.src_dir):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)  # noqa: S103


def _walk(root: Path) -> list[tuple[Path, int, int]]:
    found = [(root, 0o750, 0o640)]
    for base, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            p = Path(base) / name
            if not p.is_symlink():
                found.append((p, 0o750, 0o640))
    return found


def create_args(job: JobSpec, *, image_id: str, runtime: str, seccomp: str,
                settings: ContainerSettings, user: tuple[int, int], name: str,
                labels: dict[str, str],
                ulimit_type: Any, mount_type: Any,
                log_config: Any, extras: JobExtras = JobExtras()
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(create_container kwargs, create_host_config kwargs) for one job.

    The docker SDK's types are passed in so this module stays importable without the SDK.
    """
    lim = job.limits
    uid, gid = user
    if uid == 0 or gid == 0:
        raise SandboxError("docker: the worker may not run as root (uid or gid 0)")
    p = CONTAINER_PATHS
    ulimits = [
        ulimit_type(name="core", soft=0, hard=0),
        ulimit_type(name="nofile", soft=lim.max_open_files, hard=lim.max_open_files),
        ulimit_type(name="fsize", soft=lim.max_file_size_mb * MB, hard=lim.max_file_size_mb * MB),
        # RLIMIT_NPROC counts per host uid (all containers of this user): pids_limit is the
        # per-container bound, this one only a backstop
        ulimit_type(name="nproc", soft=lim.max_processes, hard=lim.max_processes),
        ulimit_type(name="cpu", soft=lim.cpu_time_s, hard=lim.cpu_time_s),
    ]
    # nr_inodes: a file-count bomb runs out of inodes here, as in the process backend
    tmp_opts = (f"rw,exec,nosuid,nodev,size={settings.tmpfs_mb}m,nr_inodes=32768,mode=0700,"
                f"uid={uid},gid={gid}")
    host = {
        "network_mode": "none",
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges", f"seccomp={seccomp}"],
        "privileged": False,
        "ipc_mode": "private",
        "pids_limit": lim.max_processes,
        "mem_limit": lim.memory_mb * MB,
        "memswap_limit": lim.memory_mb * MB,
        "nano_cpus": int(settings.cpus * 1e9),
        "oom_score_adj": 1000,
        "ulimits": ulimits,
        "init": True,
        "runtime": runtime,
        "shm_size": settings.shm_mb * MB,
        # the container's own /tmp: a private tmpfs, not the host's
        "tmpfs": {**({} if extras.host_scratch else {p.tmp: tmp_opts}),
                  "/tmp": "rw,noexec,nosuid,nodev,size=64m,nr_inodes=4096,mode=1777"},  # noqa: S108
        "mounts": [
            *(mount_type(target=b, source=b, type="bind", read_only=True)
              for b in extras.binds),
            *(mount_type(target=c, source=h, type="bind", read_only=True)
              for h, c in extras.file_binds),
            mount_type(target=p.src, source=str(job.src_dir), type="bind", read_only=True),
            mount_type(target=p.data, source=str(job.data_dir), type="bind", read_only=True),
            mount_type(target=p.out, source=str(job.out_dir), type="bind", read_only=False),
            *([mount_type(target=p.tmp, source=str(job.tmp_dir), type="bind", read_only=False)]
              if extras.host_scratch else []),
        ],
        "log_config": log_config,  # no host-side log file: stderr comes over the attach socket
        "auto_remove": False,  # we read State (OOMKilled, ExitCode) before removing
    }
    if extras.device_request is not None:
        host["device_requests"] = [extras.device_request]
    if extras.devices:
        host["devices"] = list(extras.devices)
    container = {
        "image": image_id,
        "entrypoint": WORKER_ARGV[:1],
        "command": WORKER_ARGV[1:],
        "user": f"{uid}:{gid}",
        "environment": container_env(
            job, None if extras.host_path is None else list(extras.host_path), dict(extras.env)),
        "working_dir": p.tmp,
        "hostname": "sandbox",
        "stdin_open": True,
        "tty": False,
        "labels": labels,
        "name": name,
        "network_disabled": True,
    }
    return container, host
