"""Sandbox backends behind one interface; ``select_backend`` honours the policy's minimum.

``auto`` picks, in order: the hardened process backend (where user namespaces really work),
the docker backend (where an engine, the runtime and the worker image are there), and last
the plain process backend, which records a warning in every verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import PolicyError, SandboxError
from ..models.policy import Policy
from .interface import ExitInfo, JobPaths, JobSpec, Sandbox, SandboxedProcess

__all__ = ["ExitInfo", "JobPaths", "JobSpec", "Sandbox", "SandboxedProcess", "select_backend"]
BACKENDS = ("auto", "process", "docker")


def _docker(runtime: str) -> Sandbox:
    """The docker backend, or ``SandboxError`` saying why it is not available here."""
    try:
        from .docker import DockerSandbox
    except ImportError as exc:
        raise SandboxError(f"docker backend not available: {exc}") from None
    return DockerSandbox(runtime=runtime)


def select_backend(name: str, policy: Policy, *,
                   hidden_paths: Sequence[str | Path] = ()) -> Sandbox:
    """Build the backend ``name`` (``auto``, ``process`` or ``docker``) for ``policy``.

    ``hidden_paths``: host paths (audit log, key directories) the process backend covers in
    the worker's view; a docker container never sees host paths it was not given.
    Raises ``SandboxError`` if the backend cannot run here, ``PolicyError`` if it lacks an
    isolation layer the policy requires.
    """
    from . import capabilities
    from .process import ProcessSandbox

    if name not in BACKENDS:
        raise PolicyError(f"unknown sandbox backend {name!r} (one of {', '.join(BACKENDS)})")
    backend: Sandbox
    if name == "docker":
        backend = _docker(policy.sandbox.docker_runtime)
    elif name == "process" or capabilities.namespaces().ok:
        backend = ProcessSandbox(hidden_paths=hidden_paths)
    else:
        try:
            backend = _docker(policy.sandbox.docker_runtime)
        except SandboxError:
            plain = ProcessSandbox(hardened=False, hidden_paths=hidden_paths)
            plain.note(f"auto: no user namespaces ({capabilities.namespaces().detail}) and no "
                       "docker backend: plain process sandbox")
            backend = plain
    missing = [layer for layer in policy.sandbox.require if layer not in backend.isolation()]
    if missing:
        raise PolicyError(f"policy requires isolation {missing}, backend {backend.name!r} "
                          f"provides {backend.isolation()}")
    return backend
