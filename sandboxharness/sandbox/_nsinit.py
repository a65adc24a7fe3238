"""Sandbox launcher and pid-namespace init. Runs as ``python -I -S _nsinit.py CFG_FD CTL_FD``.

Stdlib only and self-contained: it is started by path, before (and instead of) importing
the harness, and its code is trusted. The host hands it a JSON config on ``CFG_FD`` and
listens on ``CTL_FD`` for one-line messages: ``E <why>`` (setup failed: a harness error),
``R`` (the worker was exec'd), ``X <status>`` (the worker ended: exit code, or -signal).

Without namespaces (the plain variant) the launcher joins the job's cgroups, applies the
rlimits, ``no_new_privs`` and the seccomp filter and execs the worker itself.

With namespaces the process tree is::

    A launcher (host pid ns)  -- joins cgroups, unshares user+mnt+net+ipc+uts+pid
    |   B uid-map helper (host root only: maps the sandbox uid, then exits)
    +-- C init, pid 1         -- builds the filesystem view, reaps, forwards the exit status
        +-- D worker          -- unprivileged uid, no capabilities, rlimits, seccomp; exec

C's death (host kill of the process group, A's death via PDEATHSIG, or C's own exit when
the worker is gone) makes the kernel kill everything left in the pid namespace.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import signal
import sys
import time
from typing import Any

Cfg = dict[str, Any]
SHM = "/dev/shm"  # noqa: S108 - the mount point we cover with a private tmpfs

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 22, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER = 4, 2
# statvfs f_flag bit -> mount flag (ST_RELATIME is 4096, MS_RELATIME is 1 << 21)
_ST_TO_MS = ((1, MS_RDONLY), (2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC),
             (1024, MS_NOATIME), (2048, MS_NODIRATIME), (4096, MS_RELATIME))

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_char_p]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                        ctypes.c_ulong]


class SetupError(Exception):
    """The sandbox could not be built; reported to the host as ``E <message>``."""


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)} (errno {err})")


def _enc(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def _mount(src: str | None, dst: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    _check(_libc.mount(_enc(src), _enc(dst), _enc(fstype), flags, _enc(data)),
           f"mount {src or fstype or ''} on {dst}")


def _prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    _check(_libc.prctl(option, arg2, arg3, 0, 0), f"prctl({option})")


def _kept_flags(path: str) -> int:
    """Mount flags of ``path`` that must be repeated on a remount (locked in a user ns)."""
    st = os.statvfs(path).f_flag
    return sum(ms for bit, ms in _ST_TO_MS if st & bit and ms != MS_RDONLY)


def _remount(path: str, readonly: bool) -> None:
    flags = MS_REMOUNT | MS_BIND | _kept_flags(path) | (MS_RDONLY if readonly else 0)
    _mount(None, path, None, flags)


def _write(path: str, data: str) -> None:
    with open(path, "w") as fh:
        fh.write(data)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _say(ctl: int, msg: str) -> None:
    data = (msg.replace("\n", " ") + "\n").encode("utf-8", "replace")
    try:
        os.write(ctl, data)
    except OSError:
        pass


# -- the worker's own last steps (plain variant: in A; namespaced: in D) ----------------------
def _harden_and_exec(cfg: Cfg, errfd: int, prefix: str = "") -> None:
    try:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        ns = cfg.get("ns")
        if ns:
            _prctl(PR_SET_DUMPABLE, 1)  # so that it may write its own oom_score_adj
            _write("/proc/self/oom_score_adj", str(ns.get("oom_score_adj", 1000)))
            last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
            for cap in range(last_cap + 1):
                _prctl(PR_CAPBSET_DROP, cap)
            _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
        for res, value in cfg.get("rlimits", []):
            soft, hard = resource.getrlimit(res)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(res, (value, value))
        if cfg.get("no_new_privs"):
            _prctl(PR_SET_NO_NEW_PRIVS, 1)
        if cfg.get("seccomp"):
            prog = bytes.fromhex(cfg["seccomp"])
            buf = ctypes.create_string_buffer(prog, len(prog))
            fprog = _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
            _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
        os.chdir(cfg["cwd"])
        argv = cfg["argv"]
        os.execve(argv[0], argv, cfg["env"])  # noqa: S606 - argv list, no shell
    except (OSError, SetupError, ValueError) as exc:
        os.write(errfd, f"{prefix}worker setup: {exc}\n".encode("utf-8", "replace"))
        os._exit(127)


# -- namespaces: uid maps ---------------------------------------------------------------------
def _map_ids(ns: Cfg, pid: int, privileged: bool) -> None:
    inner_uid, inner_gid = ns["inner_uid"], ns["inner_gid"]
    if not privileged:
        _write(f"/proc/{pid}/setgroups", "deny")
    _write(f"/proc/{pid}/uid_map", f"{inner_uid} {ns['outer_uid']} 1\n")
    _write(f"/proc/{pid}/gid_map", f"{inner_gid} {ns['outer_gid']} 1\n")


def _unshare_and_map(ns: Cfg) -> None:
    flags = (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
             | CLONE_NEWPID)
    if ns["uid_mode"] != "root":
        _check(_libc.unshare(flags), "unshare")
        _map_ids(ns, os.getpid(), privileged=False)
        return
    # Host root maps the sandbox to an unprivileged host uid. Only a process left in the
    # parent user namespace may write such a map: a short-lived helper does it.
    me = os.getpid()
    go_r, go_w = os.pipe()
    res_r, res_w = os.pipe()
    helper = os.fork()
    if helper == 0:
        try:
            os.close(go_w)
            os.close(res_r)
            if os.read(go_r, 1) == b"1":
                _map_ids(ns, me, privileged=True)
                os.write(res_w, b"ok")
        except OSError as exc:
            os.write(res_w, f"uid map: {exc}".encode())
        os._exit(0)
    os.close(go_r)
    os.close(res_w)
    try:
        _check(_libc.unshare(flags), "unshare")
    finally:
        os.write(go_w, b"1")
        os.close(go_w)
        answer = _read_all(res_r)
        os.waitpid(helper, 0)
    if answer != b"ok":
        raise SetupError(answer.decode("utf-8", "replace") or "uid map helper died")


# -- namespaces: the filesystem view (in C) ---------------------------------------------------
def _unescape(raw: bytes) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    return os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), raw))


def _mountpoints() -> list[str]:
    points = []
    with open("/proc/self/mountinfo", "rb") as fh:
        for line in fh:
            points.append(_unescape(line.split()[4]))
    return sorted(set(points), key=lambda p: (p.count("/"), p))


def _hide(path: str) -> None:
    if os.path.isdir(path):
        _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
               "size=4k,nr_inodes=16,mode=0555")
    elif os.path.lexists(path):
        _mount("/dev/null", path, None, MS_BIND)


def _readonly_everything() -> None:
    for point in _mountpoints():
        if point == "/proc" or point.startswith("/proc/"):
            continue  # replaced by a fresh proc for the new pid namespace
        try:
            _remount(point, readonly=True)
        except (SetupError, OSError):
            # A mount shadowed by a later one cannot be reached by path (nor by the worker);
            # anything still reachable must be read-only now, or the sandbox does not start.
            try:
                if os.statvfs(point).f_flag & 1:
                    continue
            except OSError:
                continue
            raise


def _bind_from(fd: int, dst: str, rec: bool) -> None:
    _mount(f"/proc/self/fd/{fd}", dst, None, MS_BIND | (MS_REC if rec else 0))


def _mkpoint(path: str, is_dir: bool) -> None:
    if is_dir:
        os.makedirs(path, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        if not os.path.lexists(path):
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def _minimal_dev(devices: list[str], fds: dict[str, int]) -> None:
    """A fresh /dev with only the listed host device nodes (bound: mknod is not allowed)."""
    _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=1m,nr_inodes=1024,mode=0755")
    for dev in devices:
        _mkpoint(dev, is_dir=False)
        _bind_from(fds[dev], dev, rec=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"/dev/{name}")
    os.mkdir(SHM, 0o755)


def _build_view(ns: Cfg) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    fds = {p: os.open(p, os.O_PATH | os.O_CLOEXEC)
           for p in [b["src"] for b in ns["binds"]] + ns["expose"] + ns["devices"]}
    for path in sorted(ns["hide"], key=lambda p: -p.count("/")):
        _hide(path)
    _readonly_everything()
    # from here on as the sandbox uid (keeping the namespace capabilities: inner root is
    # unmapped, so the kernel's setuid fixups never clear them)
    if ns["uid_mode"] == "root":
        os.setgroups([])
    os.setresgid(ns["inner_gid"], ns["inner_gid"], ns["inner_gid"])
    os.setresuid(ns["inner_uid"], ns["inner_uid"], ns["inner_uid"])
    _prctl(PR_SET_DUMPABLE, 1)
    os.umask(0o022)
    _minimal_dev(ns["devices"], fds)
    covers = [c for c in ns["cover"] if os.path.isdir(c) and not os.path.islink(c)]
    for cover in covers:
        opts = (f"size={ns['shm_mb']}m,nr_inodes=4096,mode=1777" if cover == SHM
                else "size=16m,nr_inodes=4096,mode=0755")
        _mount("tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, opts)
    for path in ns["expose"]:  # runtime files under a covered dir (e.g. a venv in /root)
        if any(path.startswith(c.rstrip("/") + "/") for c in covers):
            _mkpoint(path, os.path.isdir(f"/proc/self/fd/{fds[path]}"))
            _bind_from(fds[path], path, rec=True)
            _remount(path, readonly=True)
    for bind in ns["binds"]:
        _mkpoint(bind["dst"], True)
        _bind_from(fds[bind["src"]], bind["dst"], rec=not bind["rw"])
        _remount(bind["dst"], readonly=not bind["rw"])
    scratch = ns["scratch"]
    _mkpoint(scratch["dst"], True)
    _mount("tmpfs", scratch["dst"], "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={scratch['size_mb']}m,nr_inodes={scratch['inodes']},mode=0700")
    for cover in covers:
        if cover != SHM:
            _remount(cover, readonly=True)
    _remount("/dev", readonly=True)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # sysfs of the new network namespace: the host's interfaces and cgroupfs vanish with it
    _mount("sysfs", "/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for fd in fds.values():
        os.close(fd)


# -- namespaces: C, pid 1 -----------------------------------------------------------------------
def _init(cfg: Cfg, ctl: int) -> None:
    ns = cfg["ns"]
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        host = ns.get("hostname", "sandbox").encode()
        _check(_libc.sethostname(host, len(host)), "sethostname")
        _build_view(ns)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # again: the uid change above cleared it
    except (OSError, SetupError) as exc:
        _say(ctl, f"E sandbox setup: {exc}")
        os._exit(125)
    err_r, err_w = os.pipe()  # close-on-exec: EOF without data means the exec succeeded
    worker = os.fork()
    if worker == 0:
        os.close(ctl)
        os.close(err_r)
        _harden_and_exec(cfg, err_w)
    os.close(err_w)
    _prctl(PR_SET_DUMPABLE, 0)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    err = _read_all(err_r)
    os.close(err_r)
    if err:
        _say(ctl, "E " + err.decode("utf-8", "replace"))
        os._exit(125)
    _say(ctl, "R")
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(125)
        if pid == worker:
            break
    code = os.waitstatus_to_exitcode(status)
    _say(ctl, f"X {code}")
    os._exit(0)  # the kernel now kills whatever the worker left behind


def _namespaced(cfg: Cfg, ctl: int) -> None:
    host = os.getppid()
    # Opened here, in the host's mount namespace: after the fork A shares C's new namespace,
    # and an open while C rebuilds /dev either finds no /dev/null or holds C's placeholder
    # file open for writing, so that C's read-only remount of /dev fails with EBUSY.
    devnull = os.open(os.devnull, os.O_RDWR)
    _unshare_and_map(cfg["ns"])
    child = os.fork()
    if child == 0:
        os.close(devnull)
        _init(cfg, ctl)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    while True:  # if the host dies, take the sandbox down with it (C's death ends the pid ns)
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid == child:
            break
        if os.getppid() != host:
            os.kill(child, signal.SIGKILL)
        time.sleep(0.05)
    os._exit(max(os.waitstatus_to_exitcode(status), 0))


def main() -> None:
    cfg_fd, ctl = int(sys.argv[1]), int(sys.argv[2])
    os.set_inheritable(ctl, False)
    try:
        cfg = json.loads(_read_all(cfg_fd))
        os.close(cfg_fd)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for procs in cfg.get("cgroups", []):
            _write(procs, str(os.getpid()))
        if cfg.get("ns"):
            _namespaced(cfg, ctl)
        else:
            _harden_and_exec(cfg, ctl, prefix="E ")
    except (OSError, SetupError, ValueError) as exc:
        _say(ctl, f"E sandbox setup: {exc}")
        os._exit(125)


if __name__ == "__main__":
    main()
