"""One process-backend job as a running child: the trusted launcher (``_nsinit.py``) is
started with the job's :class:`~._launch.Launch` plan, then this object is the host's handle on
it (worker pipes, the launcher's control channel, deadline, out-dir quota, exit status, cgroup
cleanup). Every live child is registered so a signal handler can kill them all.
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
from pathlib import Path
from typing import IO

from .._internal.worker_env import BASE_PATH
from ..errors import SandboxError
from ._launch import Launch
from ._logs import CappedReader
from .interface import ExitInfo, SandboxedProcess
from .out_quota import OutDirWatch

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
    def host_pids(self) -> list[int]:
        return [self._proc.pid]  # the launcher: the worker is its descendant

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


def start(launch: Launch, deadline_s: float) -> SandboxedProcess:
    """Start the launcher for ``launch``; on any failure its job cgroup is removed too."""
    try:
        return _Child(launch, deadline_s)
    except BaseException:
        if launch.cgroup is not None:  # no job cgroup may outlive a failed start
            launch.cgroup.kill_all()
            launch.cgroup.wait_empty(5.0)
            launch.cgroup.remove()
        raise
