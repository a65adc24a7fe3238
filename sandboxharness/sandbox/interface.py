"""The sandbox layer: run the worker in isolation and give the host a byte channel to it.

Backends (process, docker) implement :class:`Sandbox`. The host side speaks the worker
protocol (``sandboxharness.worker.protocol``) over :class:`SandboxedProcess`'s channel;
backends know nothing about kernels, only about processes, files and limits.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path

from ..models.policy import Limits


@dataclass(frozen=True)
class JobSpec:
    """One sandboxed worker run. Host paths; the backend decides how the worker sees them."""

    role: str
    """``candidate`` or ``reference`` (a label for logs; the command is the same worker)."""
    src_dir: Path
    """Sources to import. Read-only inside the sandbox."""
    data_dir: Path
    """Input blobs (safetensors). Read-only inside the sandbox."""
    out_dir: Path
    """The only place results may be written. Read by the host with size caps, no symlinks."""
    tmp_dir: Path
    """Private scratch: TMPDIR, HOME, compiler caches."""
    limits: Limits
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment, already scrubbed by the host (never the host's own environment)."""
    gpu: bool = False


@dataclass(frozen=True)
class JobPaths:
    """The job's directories as the worker sees them."""

    src: str
    data: str
    out: str
    tmp: str


@dataclass(frozen=True)
class ExitInfo:
    returncode: int | None
    """Exit status; negative: killed by that signal; None: could not be determined."""
    timed_out: bool = False
    """The host killed the job at its wall-clock limit."""
    limit_hit: str | None = None
    """Which resource limit killed it, when the backend can tell (``memory``, ``pids``...)."""
    stdout: str = ""
    stderr: str = ""
    """Captured logs, capped at ``Limits.max_log_bytes`` each."""
    dropped_log_bytes: int = 0


class SandboxedProcess(abc.ABC):
    """A running worker: a framed byte channel plus lifecycle control."""

    paths: JobPaths

    @abc.abstractmethod
    def send(self, data: bytes) -> None:
        """Write to the worker's request channel. Raises ``BrokenPipeError`` if it is gone."""

    @abc.abstractmethod
    def recv(self, max_bytes: int, timeout: float) -> bytes:
        """Up to ``max_bytes`` from the reply channel; ``b''`` at EOF; ``TimeoutError`` if none."""

    def host_pids(self) -> list[int]:
        """Host pids whose descendants are this job (for telling its GPU use from others')."""
        return []

    @abc.abstractmethod
    def kill(self) -> ExitInfo:
        """Kill the whole process tree (idempotent), reap it, return how it ended."""

    @abc.abstractmethod
    def wait(self, timeout: float) -> ExitInfo | None:
        """Wait for a voluntary exit; None if still running after ``timeout``."""

    def __enter__(self) -> SandboxedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


class Sandbox(abc.ABC):
    """A backend. Stateless between jobs: every job gets a fresh sandbox."""

    name: str

    @abc.abstractmethod
    def start(self, job: JobSpec, deadline_s: float) -> SandboxedProcess:
        """Start the worker for ``job``; the backend kills it after ``deadline_s`` wall-clock."""

    def isolation(self) -> list[str]:
        """Isolation layers this backend puts in force (recorded in every verdict)."""
        return []

    def warnings(self) -> list[str]:
        """Degradations (a layer that was asked for but is unavailable here)."""
        return []

    def describe(self) -> dict[str, str]:
        """Backend facts for the verdict's environment (e.g. the image digest, the runtime)."""
        return {}
