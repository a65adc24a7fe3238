"""The process backend: the worker as a child process, started by a small trusted launcher
(``_nsinit.py``) that puts the isolation layers in place before the worker's exec.

Hardened (the default where user namespaces work): new user, pid, net, mount, ipc and uts
namespaces; the worker is an unprivileged uid without capabilities (as host root: a fresh
unprivileged host uid per job); a filesystem view where everything is read-only, the job's
out dir and a private size-capped scratch tmpfs are the only writable places, and /tmp,
/var/tmp, /root, /home, /run, /dev/shm and the host's ``hidden_paths`` (audit log, keys, the
job's own host directories) are covered; seccomp, ``no_new_privs``, rlimits and cgroups.

Plain (``hardened=False``, for machines without user namespaces): own session, rlimits,
scrubbed environment, seccomp and ``no_new_privs`` and cgroups where available.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from .._internal.env import BASE_PATH
from ..errors import SandboxError
from . import cgroups, seccomp
from ._launch import INNER_ROOT, SANDBOX_UID_BASE, Launch
from ._logs import CappedReader
from .docker_watch import OutDirWatch
from .interface import ExitInfo, JobSpec, Sandbox, SandboxedProcess

__all__ = ["INNER_ROOT", "SANDBOX_UID_BASE", "ProcessSandbox", "kill_running", "reap_all"]

NSINIT = str(Path(__file__).with_name("_nsinit.py"))
READY_TIMEOUT_S = 30.0


# started, not yet reaped; a plain dict: copying it is atomic, so a signal handler needs no lock
_LIVE: dict[int, _Child] = {}


def kill_running() -> None:
    """SIGKILL every live sandboxed tree; no wait, no lock: safe in a signal handler."""
    for child in list(_LIVE.values()):
        child._killpg()


def reap_all() -> None:
    """Kill and reap what is still live (an interrupt unwound past its owner)."""
    for child in list(_LIVE.values()):
        child.kill()


class _Child(SandboxedProcess):
    def __init__(self, launch: Launch, deadline_s: float) -> None:
        job = launch.job
        self.paths = launch.paths
        self._cgroup = launch.cgroup
        self._namespaced = launch.namespaced
        self._info: ExitInfo | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(deadline_s, self._expire)
        self._timer.daemon = True
        self._watch: OutDirWatch | None = None
        self._log: CappedReader | None = None
        self._timed_out, self._ctl_buf = False, b""
        cfg_r, cfg_w = os.pipe()
        self._ctl, ctl_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", NSINIT, str(cfg_r), str(ctl_w)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd="/", env={"PATH": BASE_PATH, "LANG": "C.UTF-8"},
                start_new_session=True, close_fds=True, pass_fds=(cfg_r, ctl_w),
            )
        except OSError as exc:
            for fd in (cfg_r, cfg_w, self._ctl, ctl_w):
                os.close(fd)
            self._drop_cgroup()
            raise SandboxError(f"cannot start the sandbox launcher: {exc}") from exc
        _LIVE[id(self)] = self
        try:  # from here on every exit path (an interrupt too) kills and reaps the launcher
            os.close(cfg_r)
            os.close(ctl_w)
            try:
                with os.fdopen(cfg_w, "wb") as fh:
                    fh.write(json.dumps(launch.config).encode())
            except OSError as exc:
                raise SandboxError(f"sandbox launcher refused its configuration: {exc}") from None
            if not (self._proc.stdin and self._proc.stdout and self._proc.stderr):
                raise SandboxError("sandbox launcher started without its pipes")
            self._stdin: IO[bytes] = self._proc.stdin
            self._rfd = self._proc.stdout.fileno()
            self._log = CappedReader(self._proc.stderr, job.limits.max_log_bytes)
            self._timer.start()
            # the out dir is the one writable host directory: no mount option bounds it
            self._watch = OutDirWatch(job.out_dir, launch.out_quota[0], launch.out_quota[1],
                                      self._killpg)
            self._await_ready()
        except BaseException:
            self.kill()
            raise

    # -- launcher control channel ---------------------------------------------------------
    def _read_ctl(self, timeout: float) -> bool:
        """Read what is there within ``timeout``; False at EOF."""
        ready, _, _ = select.select([self._ctl], [], [], max(timeout, 0))
        if not ready:
            return True
        chunk = os.read(self._ctl, 4096)
        self._ctl_buf += chunk
        return bool(chunk)

    def _ctl_lines(self) -> list[str]:
        return self._ctl_buf.decode("utf-8", "replace").splitlines()

    def _await_ready(self) -> None:
        until = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < until:
            alive = self._read_ctl(until - time.monotonic())
            lines = self._ctl_lines()
            errors = [ln[2:] for ln in lines if ln.startswith("E ")]
            if errors:
                self.kill()
                raise SandboxError(f"sandbox could not start the worker: {errors[0]}")
            if "R" in lines or (not alive and not self._namespaced):
                return  # plain: the control pipe closes at the worker's exec
            if not alive:
                info = self.kill()
                raise SandboxError("sandbox launcher died before the worker started "
                                   f"(status {info.returncode}): {info.stderr[-500:]}")
        self.kill()
        raise SandboxError(f"sandbox not ready within {READY_TIMEOUT_S:.0f} s")

    def _worker_status(self) -> int | None:
        for _ in range(50):
            if not self._read_ctl(0.02):
                break
        for line in self._ctl_lines():
            if line.startswith("X "):
                try:
                    return int(line[2:])
                except ValueError:
                    return None
        return None

    # -- lifecycle --------------------------------------------------------------------------
    def _expire(self) -> None:
        self._timed_out = True
        self._killpg()

    def _killpg(self) -> None:
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self._cgroup is not None:
            self._cgroup.kill_all()

    def _drop_cgroup(self) -> tuple[int, int]:
        if self._cgroup is None:
            return 0, 0
        self._cgroup.wait_empty(5.0)
        counts = self._cgroup.oom_kills(), self._cgroup.pids_refusals()
        self._cgroup.remove()
        self._cgroup = None
        return counts

    def send(self, data: bytes) -> None:
        self._stdin.write(data)
        self._stdin.flush()

    def recv(self, max_bytes: int, timeout: float) -> bytes:
        ready, _, _ = select.select([self._rfd], [], [], max(timeout, 0))
        if not ready:
            raise TimeoutError
        return os.read(self._rfd, max_bytes)

    def wait(self, timeout: float) -> ExitInfo | None:
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.kill()

    def kill(self) -> ExitInfo:
        with self._lock:
            if self._info is None:
                self._timer.cancel()
                if self._watch is not None:
                    self._watch.stop()
                self._killpg()  # also takes down anything the worker left in its group
                launcher_rc = self._proc.wait()
                status = self._worker_status() if self._namespaced else None
                rc = status if status is not None else launcher_rc
                oom, pids = self._drop_cgroup()
                for stream in (self._proc.stdin, self._proc.stdout):
                    with contextlib.suppress(OSError):
                        stream.close()  # type: ignore[union-attr]
                os.close(self._ctl)
                limit = ("memory" if oom else "cpu" if rc == -signal.SIGXCPU
                         else "pids" if pids and rc != 0 else None)
                log = self._log.text() if self._log is not None else ""
                if self._watch is not None and self._watch.exceeded:
                    limit = "disk"
                    log += f"\n[sandboxharness] killed: {self._watch.exceeded}\n"
                self._info = ExitInfo(
                    returncode=rc, timed_out=self._timed_out, limit_hit=limit,
                    stderr=log, dropped_log_bytes=self._log.dropped if self._log else 0,
                )
                _LIVE.pop(id(self), None)
            return self._info


class ProcessSandbox(Sandbox):
    """The embedded backend.

    ``hardened``: True requires namespaces (a start fails with ``SandboxError`` where they
    do not work), False is the plain variant, None (default) probes once and picks.
    ``hidden_paths``: host paths the worker must not see (audit log, key directories...).
    ``out_quota_mb``/``out_max_entries``: what the job may leave in its out dir (the one
    writable host directory); past it the job is killed (``limit_hit="disk"``).
    """

    name = "process"

    def __init__(self, *, hardened: bool | None = None, hidden_paths: Sequence[str | Path] = (),
                 use_seccomp: bool = True, use_cgroups: bool = True,
                 out_quota_mb: int = 4096, out_max_entries: int = 2_000) -> None:
        from .._internal import probe

        self._notes: list[str] = []
        if hardened is None:
            result = probe.namespaces()
            hardened = result.ok
            if not hardened:
                self.note(f"user namespaces unusable here ({result.detail}): plain process "
                          "sandbox, without pid/net/mount isolation")
        self.hardened = hardened
        self.hidden_paths = [Path(p) for p in hidden_paths]
        self.out_quota_mb, self.out_max_entries = out_quota_mb, out_max_entries
        self.job_uids: list[int] = []
        """Host uids this backend ran jobs as (as root: one fresh uid per job)."""
        self.seccomp_filter: bytes | None = None
        if use_seccomp and not seccomp.kernel_supports():
            self.note("seccomp: this kernel has no seccomp filters; no syscall filter")
        elif use_seccomp:
            try:
                self.seccomp_filter = seccomp.build_filter()
            except seccomp.UnsupportedArch as exc:
                self.note(f"seccomp: {exc}; no syscall filter")
        self.cgroup_support = cgroups.detect() if use_cgroups else None
        if self.cgroup_support is not None:
            cgroups.remove_stale(self.cgroup_support)
            for why in self.cgroup_support.notes:
                self.note(f"cgroups: {why}")

    def note(self, warning: str) -> None:
        if warning not in self._notes:
            self._notes.append(warning)

    def start(self, job: JobSpec, deadline_s: float) -> SandboxedProcess:
        return self._start(Launch(self, job), deadline_s)

    def start_command(self, job: JobSpec, deadline_s: float, argv: list[str]) -> SandboxedProcess:
        """Run ``argv`` instead of the worker, same isolation (probes and tests)."""
        return self._start(Launch(self, job, argv), deadline_s)

    @staticmethod
    def _start(launch: Launch, deadline_s: float) -> SandboxedProcess:
        try:
            return _Child(launch, deadline_s)
        except BaseException:
            if launch.cgroup is not None:  # no job cgroup may outlive a failed start
                launch.cgroup.kill_all()
                launch.cgroup.wait_empty(5.0)
                launch.cgroup.remove()
            raise

    def isolation(self) -> list[str]:
        layers = ["session", "rlimits", "scrubbed-env", "private-tmp", "no_new_privs",
                  "out-quota"]
        if self.hardened:
            layers += ["userns", "pidns", "netns", "mountns", "ipcns", "utsns",
                       "read-only-root", "non-root", "hidden-paths"]
        if self.seccomp_filter is not None:
            layers.append("seccomp")
        if self.cgroup_support is not None and self.cgroup_support.by_controller:
            layers += ["cgroups", *self.cgroup_support.versions]
        return layers

    def warnings(self) -> list[str]:
        return list(self._notes)
