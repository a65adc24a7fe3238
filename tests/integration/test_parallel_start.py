"""Sandbox start-up under parallel load (issue 10: 2 of 80 parallel starts failed with
"Device or resource busy" on /dev or a missing /dev/null, and passed when rerun alone).

The cause: after its fork the launcher shared the new mount namespace with the pid-1 init
that was rebuilding /dev, and opened /dev/null there. Opened between init's tmpfs mount and
its bind of /dev/null it found nothing (ENOENT); opened during the bind it held init's
placeholder file open for writing, and init's read-only remount of /dev failed (EBUSY). The
launcher now opens /dev/null before it unshares: in the host's namespace.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from sandboxharness.models.policy import Limits
from sandboxharness.sandbox import JobSpec, capabilities
from sandboxharness.sandbox.interface import SandboxedProcess
from sandboxharness.sandbox.process import ProcessSandbox

HARDENED = capabilities.namespaces()
needs_ns = pytest.mark.skipif(not HARDENED.ok, reason=f"no user namespaces: {HARDENED.detail}")
STARTS = 32


def _job(base: Path, i: int) -> JobSpec:
    root = base / f"shx-job-{i}" / "candidate"
    dirs = {k: root / k for k in ("src", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(parents=True, mode=0o700)
    return JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["src"],
                   out_dir=dirs["out"], tmp_dir=dirs["tmp"], limits=Limits())


def _finish(child: SandboxedProcess) -> tuple[bytes, int | None]:
    data = b""
    try:
        while chunk := child.recv(4096, 60):
            data += chunk
    except TimeoutError:
        pass
    info = child.wait(30) or child.kill()
    return data, info.returncode


@needs_ns
@pytest.mark.slow
def test_many_parallel_starts_all_succeed(tmp_path: Path) -> None:
    """32 sandboxes started at the same moment from 32 threads: every one starts, runs its
    job and leaves no job cgroup behind."""
    sandbox = ProcessSandbox(hardened=True)
    barrier = threading.Barrier(STARTS)
    results: dict[int, object] = {}
    cgroup_dirs: list[Path] = []

    def one(i: int) -> None:
        job = _job(tmp_path, i)
        barrier.wait()
        try:
            child = sandbox.start_command(job, 120, [sys.executable, "-I", "-S", "-c",
                                                     "import os; os.write(1, b'ok')"])
            cg = getattr(child, "_cgroup", None)
            cgroup_dirs.extend(d for _, d in (cg.dirs.values() if cg else ()))
            results[i] = _finish(child)
        except Exception as exc:  # noqa: BLE001  reported below, with the others
            results[i] = f"{type(exc).__name__}: {exc}"

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(STARTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    bad = {i: r for i, r in results.items() if r != (b"ok", 0)}
    assert len(results) == STARTS and bad == {}, bad
    assert [d for d in cgroup_dirs if d.exists()] == []
    assert time.monotonic() - t0 < 60


def _mount_id(pid: int, fd: int) -> int:
    for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines():
        if line.startswith("mnt_id:"):
            return int(line.split()[1])
    raise AssertionError("no mnt_id in fdinfo")


@needs_ns
def test_launcher_opens_nothing_in_the_namespace_being_built(tmp_path: Path) -> None:
    """The race's root, checked without racing: the launcher's stdin and stdout (its
    /dev/null) come from a mount of the host's namespace, not from the /dev that init builds
    in the shared new namespace."""
    sandbox = ProcessSandbox(hardened=True)
    child = sandbox.start_command(_job(tmp_path, 0), 60, [sys.executable, "-I", "-S", "-c",
                                                          "import time; time.sleep(60)"])
    try:
        launcher = child._proc.pid  # type: ignore[attr-defined]
        host_mounts = {int(line.split()[0]) for line in
                       Path("/proc/self/mountinfo").read_text().splitlines()}
        assert {_mount_id(launcher, 0), _mount_id(launcher, 1)} <= host_mounts
    finally:
        child.kill()
