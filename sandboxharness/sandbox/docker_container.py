"""One running worker container: the attach channel, the deadline, the out-dir quota, and a
teardown that always removes the container. Also the docker SDK error translation.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from ..errors import SandboxError
from .docker_config import CONTAINER_PATHS, ContainerSettings
from .docker_stream import AttachStream
from .interface import ExitInfo, JobSpec, SandboxedProcess
from .out_quota import OutDirWatch

STDOUT_HIGH_WATER = 8 * 1024 * 1024
SCRATCH_MAX_ENTRIES = 32_768
"""The tmpfs's nr_inodes, for a host scratch dir: a file-count bomb stops there too."""


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """Turn the docker SDK's (and its HTTP stack's) exceptions into one-line SandboxErrors."""
    import docker.errors
    import requests.exceptions

    try:
        yield
    except docker.errors.APIError as exc:
        why = exc.explanation or str(exc)
        raise SandboxError(f"docker: {what}: {str(why).strip().splitlines()[0]}") from None
    except docker.errors.DockerException as exc:
        raise SandboxError(f"docker: {what}: {str(exc).strip().splitlines()[0]}") from None
    except requests.exceptions.RequestException as exc:
        raise SandboxError(f"docker: {what}: engine unreachable or not answering "
                           f"({type(exc).__name__})") from None
    except OSError as exc:
        raise SandboxError(f"docker: {what}: {exc.strerror or exc}") from None


def _signal_code(code: int) -> int:
    # docker-init (tini) reports a child killed by signal N as 128+N, as does a SIGKILLed pid 1
    return -(code - 128) if 128 < code <= 128 + 64 else code


class Container(SandboxedProcess):
    def __init__(self, api: Any, cid: str, job: JobSpec, deadline_s: float,
                 settings: ContainerSettings, *, host_scratch: bool = False) -> None:
        self.paths = CONTAINER_PATHS
        self._api, self._id = api, cid
        self._lock = threading.Lock()
        self._info: ExitInfo | None = None
        self._timed_out = False
        self._watch: OutDirWatch | None = None
        self._scratch: OutDirWatch | None = None
        with translated("attach"):
            sock = api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1,
                                                  "stream": 1})
        self._stream = AttachStream(sock, job.limits.max_log_bytes, STDOUT_HIGH_WATER)
        self._timer = threading.Timer(deadline_s, self._expire)
        self._timer.daemon = True
        try:
            with translated("start"):
                api.start(cid)
        except SandboxError:
            self._stream.close()
            raise
        self._timer.start()
        self._watch = OutDirWatch(job.out_dir, settings.out_quota_mb * 1024 * 1024,
                                  settings.out_max_entries, self._kill_now)
        if host_scratch:  # the tmpfs's size and inode caps, kept by a watch instead
            self._scratch = OutDirWatch(job.tmp_dir, settings.tmpfs_mb * 1024 * 1024,
                                        SCRATCH_MAX_ENTRIES, self._kill_now)

    @property
    def container_id(self) -> str:
        return str(self._id)

    def _expire(self) -> None:
        self._timed_out = True
        self._kill_now()

    def _kill_now(self) -> None:
        with contextlib.suppress(SandboxError):
            with translated("kill"):
                self._api.kill(self._id)

    def send(self, data: bytes) -> None:
        self._stream.send(data)

    def recv(self, max_bytes: int, timeout: float) -> bytes:
        return self._stream.recv(max_bytes, timeout)

    def wait(self, timeout: float) -> ExitInfo | None:
        import docker.errors
        import requests.exceptions

        if self._info is not None:
            return self._info
        try:
            self._api.wait(self._id, timeout=max(timeout, 0.05))
        except requests.exceptions.RequestException:  # the HTTP timeout: still running?
            if self._running():
                return None
        except docker.errors.DockerException:
            pass  # gone or refused: kill() below reaps and reports what the engine knows
        return self.kill()

    def host_pids(self) -> list[int]:
        try:
            pid = int(self._api.inspect_container(self._id)["State"]["Pid"])
        except Exception:  # noqa: BLE001  gone or unreachable: nothing to tell apart
            return []
        return [pid] if pid > 0 else []

    def _running(self) -> bool:
        try:
            return bool(self._api.inspect_container(self._id)["State"]["Running"])
        except Exception:  # noqa: BLE001  gone or unreachable: not running as far as we know
            return False

    def kill(self) -> ExitInfo:
        with self._lock:
            if self._info is None:
                self._timer.cancel()
                for watch in (self._watch, self._scratch):
                    if watch is not None:
                        watch.stop()
                try:
                    self._info = self._reap()
                finally:
                    self._stream.close()
                    remove(self._api, self._id)
            return self._info

    def _reap(self) -> ExitInfo:
        import docker.errors

        try:
            self._api.kill(self._id)  # SIGKILL: an untrusted process gets no grace period
        except docker.errors.APIError as exc:
            if exc.status_code not in (404, 409):  # 409: not running (exited on its own)
                with translated("kill"):
                    raise
        except Exception:  # noqa: BLE001  the engine itself failed: one SandboxError line
            with translated("kill"):
                raise
        with translated("wait"):
            try:
                self._api.wait(self._id, timeout=10)
            except docker.errors.NotFound:
                pass  # removed already (by cleanup_leaked or by hand): nothing to wait for
        with translated("inspect"):
            state: dict[str, Any] = self._api.inspect_container(self._id)["State"]
        self._stream.eof(2.0)  # let the reader drain what the worker wrote last
        code = state.get("ExitCode")
        rc = _signal_code(int(code)) if isinstance(code, int) and not state.get("Running") else None
        limit = "memory" if state.get("OOMKilled") else (
            "cpu" if rc == -signal.SIGXCPU else None)
        log = self._stream.log_text()
        for what, watch in (("", self._watch), ("scratch (/job/tmp): ", self._scratch)):
            if watch is not None and watch.exceeded:
                limit = "disk"
                log += f"\n[sandboxharness] killed: {what}{watch.exceeded}\n"
        return ExitInfo(returncode=rc, timed_out=self._timed_out, limit_hit=limit,
                        stderr=log, dropped_log_bytes=self._stream.dropped)


def remove(api: Any, cid: str) -> None:
    """remove(force=True) (kills if needed), retried: no container may outlive its job."""
    import docker.errors

    for attempt in range(3):
        try:
            api.remove_container(cid, force=True, v=True)
            return
        except docker.errors.NotFound:
            return
        except Exception:  # noqa: BLE001  retried, then left to cleanup_leaked()
            time.sleep(0.2 * (attempt + 1))
