"""Per-job cgroups: a memory and a pids limit for the worker's whole process tree.

Each controller is taken from cgroup v2 where it is enabled there, else from its cgroup v1
hierarchy. A job gets a fresh child cgroup per controller (``shx-<role>-<hex>``), the
sandbox launcher puts itself in before it starts anything, and the host removes it after
the job: so the limits cover every process the candidate starts and nothing else. Whether
the kernel's OOM killer fired (``oom_kill``) or ``pids.max`` refused a fork is read back
from the cgroup's event counters.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

CONTROLLERS = ("memory", "pids")
_MOUNTINFO = Path("/proc/self/mountinfo")


@dataclass(frozen=True)
class Hierarchy:
    version: int
    """1 or 2."""
    parent: Path
    """Where job cgroups are created (below this process's own cgroup in v1)."""


@dataclass(frozen=True)
class CgroupSupport:
    by_controller: dict[str, Hierarchy]
    notes: list[str] = field(default_factory=list)
    """Why a controller is missing (for ``Sandbox.warnings()`` and ``doctor``)."""

    @property
    def versions(self) -> list[str]:
        return sorted({f"cgroup-v{h.version}" for h in self.by_controller.values()})


def _unescape(raw: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), raw)


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fstype, super options) of every cgroup filesystem."""
    out = []
    try:
        lines = _MOUNTINFO.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        pre, _, post = line.partition(" - ")
        fields, tail = pre.split(), post.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((_unescape(fields[4]), tail[0], set(tail[2].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and ``''`` for v2."""
    paths: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        for ctrl in ctrls.split(",") if ctrls else [""]:
            paths[ctrl] = path
    return paths


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


def _v2_parent(mount: Path, notes: list[str]) -> tuple[Path, set[str]] | None:
    """An ``shx`` cgroup at the v2 root with memory+pids delegated to its children."""
    try:
        available = set((mount / "cgroup.controllers").read_text().split())
    except OSError:
        return None
    wanted = [c for c in CONTROLLERS if c in available]
    if not wanted or not _writable(mount):
        if wanted:
            notes.append(f"cgroup v2 at {mount} is not writable by this user")
        return None
    parent = mount / "shx"
    try:
        enable = " ".join(f"+{c}" for c in wanted)
        (mount / "cgroup.subtree_control").write_text(enable)
        parent.mkdir(exist_ok=True)
        (parent / "cgroup.subtree_control").write_text(enable)
    except OSError as exc:
        notes.append(f"cgroup v2: cannot delegate {wanted} below {mount}: {exc.strerror}")
        return None
    return parent, set(wanted)


@lru_cache(maxsize=1)
def detect() -> CgroupSupport:
    """Which controllers this process can use for job cgroups, and where."""
    notes: list[str] = []
    found: dict[str, Hierarchy] = {}
    mounts = _mounts()
    own = _own_paths()
    for point, fstype, _ in mounts:
        if fstype == "cgroup2":
            got = _v2_parent(Path(point), notes)
            if got:
                for ctrl in got[1]:
                    found.setdefault(ctrl, Hierarchy(2, got[0]))
            break
    for point, fstype, opts in mounts:
        if fstype != "cgroup":
            continue
        for ctrl in CONTROLLERS:
            if ctrl in opts and ctrl not in found and ctrl in own:
                parent = Path(point) / own[ctrl].lstrip("/")
                if _writable(parent):
                    found[ctrl] = Hierarchy(1, parent)
                else:
                    notes.append(f"cgroup v1 {ctrl} at {parent} is not writable by this user")
    for ctrl in CONTROLLERS:
        if ctrl not in found and not any(ctrl in n for n in notes):
            notes.append(f"no usable cgroup {ctrl} controller on this machine")
    return CgroupSupport(found, notes)


class JobCgroup:
    """One job's cgroups (one directory per hierarchy used)."""

    def __init__(self, dirs: dict[str, tuple[int, Path]]) -> None:
        self.dirs = dirs  # controller -> (version, directory)

    @property
    def procs_files(self) -> list[str]:
        return sorted({str(d / "cgroup.procs") for _, d in self.dirs.values()})

    def _pids(self) -> set[int]:
        pids: set[int] = set()
        for path in self.procs_files:
            try:
                pids.update(int(p) for p in Path(path).read_text().split())
            except (OSError, ValueError):
                pass
        return pids

    def kill_all(self) -> None:
        """SIGKILL everything in the job's cgroups (also what left the process group)."""
        for version, d in self.dirs.values():
            if version == 2 and (d / "cgroup.kill").exists():
                try:
                    (d / "cgroup.kill").write_text("1")
                except OSError:
                    pass
        for pid in self._pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def wait_empty(self, timeout: float) -> bool:
        until = time.monotonic() + timeout
        while self._pids():
            if time.monotonic() > until:
                return False
            self.kill_all()
            time.sleep(0.02)
        return True

    def _counter(self, ctrl: str, files: tuple[str, str], key: str) -> int:
        if ctrl not in self.dirs:
            return 0
        version, d = self.dirs[ctrl]
        try:
            text = (d / files[version - 1]).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
        return 0

    def oom_kills(self) -> int:
        return self._counter("memory", ("memory.oom_control", "memory.events"), "oom_kill")

    def pids_refusals(self) -> int:
        return self._counter("pids", ("pids.events", "pids.events"), "max")

    def remove(self) -> None:
        for _, d in self.dirs.values():
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def create(label: str, memory_mb: int, max_pids: int,
           support: CgroupSupport | None = None) -> JobCgroup:
    """Make the job's cgroups with their limits. Raises ``OSError`` if that fails."""
    support = support or detect()
    name = f"shx-{re.sub(r'[^a-z0-9]', '', label.lower())[:16]}-{secrets.token_hex(6)}"
    dirs: dict[str, tuple[int, Path]] = {}
    made: dict[Path, Path] = {}
    job = JobCgroup(dirs)
    try:
        for ctrl, hier in support.by_controller.items():
            d = made.get(hier.parent)
            if d is None:
                d = hier.parent / name
                d.mkdir()
                made[hier.parent] = d
            dirs[ctrl] = (hier.version, d)
            _limit(ctrl, hier.version, d, memory_mb, max_pids)
    except OSError:
        job.remove()
        raise
    return job


def _limit(ctrl: str, version: int, d: Path, memory_mb: int, max_pids: int) -> None:
    if ctrl == "pids":
        (d / "pids.max").write_text(str(max_pids))
        return
    limit = str(memory_mb * 1024 * 1024)
    if version == 2:
        (d / "memory.max").write_text(limit)
        if (d / "memory.swap.max").exists():
            (d / "memory.swap.max").write_text("0")
    else:
        (d / "memory.limit_in_bytes").write_text(limit)
        if (d / "memory.memsw.limit_in_bytes").exists():  # no swapping past the limit
            (d / "memory.memsw.limit_in_bytes").write_text(limit)


def remove_stale(support: CgroupSupport, older_than_s: float = 3600.0) -> list[Path]:
    """Remove empty job cgroups left by a harness that died (best effort); what went."""
    removed = []
    now = time.time()
    for hier in support.by_controller.values():
        for d in hier.parent.glob("shx-*-*"):
            try:
                if now - d.stat().st_mtime < older_than_s or (d / "cgroup.procs").read_text():
                    continue
                d.rmdir()
                removed.append(d)
            except OSError:
                continue
    return removed
