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

from collections.abc import Sequence
from pathlib import Path

from . import _child, capabilities, cgroups
from ._child import kill_running, reap_all
from ._launch import INNER_ROOT, SANDBOX_UID_BASE, Launch, LaunchSettings
from .interface import JobSpec, Sandbox, SandboxedProcess

__all__ = ["INNER_ROOT", "SANDBOX_UID_BASE", "ProcessSandbox", "kill_running", "reap_all"]


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
        self._notes: list[str] = []
        if hardened is None:
            result = capabilities.namespaces()
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
        if use_seccomp:
            self.seccomp_filter, why = capabilities.seccomp_filter()
            if why:
                self.note(f"seccomp: {why}; no syscall filter")
        self.cgroup_support = cgroups.detect() if use_cgroups else None
        if self.cgroup_support is not None:
            cgroups.remove_stale(self.cgroup_support)
            for why in self.cgroup_support.notes:
                self.note(f"cgroups: {why}")

    def note(self, warning: str) -> None:
        if warning not in self._notes:
            self._notes.append(warning)

    def settings(self) -> LaunchSettings:
        """What a launch needs from this backend, read at each start."""
        return LaunchSettings(
            hardened=self.hardened, hidden_paths=tuple(self.hidden_paths),
            seccomp_filter=self.seccomp_filter, cgroup_support=self.cgroup_support,
            out_quota_mb=self.out_quota_mb, out_max_entries=self.out_max_entries)

    def _launch(self, job: JobSpec, argv: list[str] | None = None) -> Launch:
        launch = Launch(self.settings(), job, argv)
        if launch.job_uid is not None:
            self.job_uids.append(launch.job_uid)
        for warning in launch.notes:
            self.note(warning)
        return launch

    def start(self, job: JobSpec, deadline_s: float) -> SandboxedProcess:
        return _child.start(self._launch(job), deadline_s)

    def start_command(self, job: JobSpec, deadline_s: float, argv: list[str]) -> SandboxedProcess:
        """Run ``argv`` instead of the worker, same isolation (probes and tests)."""
        return _child.start(self._launch(job, argv), deadline_s)

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
