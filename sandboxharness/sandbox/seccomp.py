"""The worker's seccomp filter, built with libseccomp (through ``pyseccomp``).

A deny list on top of the kernel's defaults: syscalls that reach kernel attack surface the
worker never needs (namespaces, mounts, tracing, keyrings, BPF, io_uring, module loading...)
return ``EPERM``; ``socket``/``socketpair`` are allowed for ``AF_UNIX`` only (CUDA needs
Unix sockets; every other family gets ``EPERM``); ``clone`` with namespace flags gets
``EPERM``; ``clone3`` gets ``ENOSYS`` so that libc falls back to ``clone`` (whose flags a
filter can read). A foreign syscall ABI (i386 or x32 on x86_64) kills the process: the
filter holds the one native architecture and libseccomp sends every other ABI, x32 included,
to the bad-architecture action.

libseccomp resolves the syscall names for the target architecture and emits the program;
it is built on the host and handed to the sandbox init as bytes (packed ``sock_filter``s).
Installing it is ``prctl(PR_SET_NO_NEW_PRIVS)`` + ``prctl(PR_SET_SECCOMP,
SECCOMP_MODE_FILTER, prog)``.
"""

from __future__ import annotations

import errno
import importlib
import os
import platform
from types import ModuleType

RET_KILL_PROCESS = 0x80000000
RET_ALLOW = 0x7FFF0000

AF_UNIX = 1
CLONE_NS_FLAGS = (0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
                  | 0x20000000 | 0x40000000)
"""CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET."""

DENIED: tuple[str, ...] = (
    # tracing and other processes' memory
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
    # namespaces and mounts (old and new mount API)
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    # kernel attack surface the worker never needs
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "keyctl", "add_key", "request_key", "personality",
    "open_by_handle_at", "name_to_handle_at", "fanotify_init", "lookup_dcookie",
    # system administration
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup",
    "settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "sethostname",
    "setdomainname",
)
"""Syscalls answered with EPERM (clearer to a candidate than a kill)."""

ARCHES: dict[str, int] = {
    "x86_64": 0xC000003E,   # AUDIT_ARCH_X86_64 (= libseccomp's SCMP_ARCH_X86_64)
    "aarch64": 0xC00000B7,  # AUDIT_ARCH_AARCH64
}
"""The architectures the policy was written for: on both, ``clone``'s flags are argument 0
and ``socket`` is a syscall of its own (not multiplexed through ``socketcall``)."""


class UnsupportedArch(Exception):
    """No filter for this machine (an architecture outside ARCHES, or no libseccomp): the
    caller degrades (and records a warning)."""


def _libseccomp() -> ModuleType:
    try:
        return importlib.import_module("pyseccomp")
    except (ImportError, OSError, RuntimeError) as exc:  # RuntimeError: no libseccomp.so
        raise UnsupportedArch(f"libseccomp not loadable ({exc})") from None


def build_filter(arch: str | None = None) -> bytes:
    """The filter program for ``arch`` (default: this machine) as packed ``sock_filter``s."""
    arch = arch or platform.machine()
    if arch not in ARCHES:
        raise UnsupportedArch(f"no seccomp policy for {arch!r}")
    sc = _libseccomp()
    eperm = sc.ERRNO(errno.EPERM)
    filt = sc.SyscallFilter(sc.ALLOW)
    filt.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    if ARCHES[arch] != sc.system_arch():
        # building for another machine: names still resolve natively, libseccomp
        # translates each rule into the target architecture's numbers
        filt.add_arch(ARCHES[arch])
        filt.remove_arch(sc.Arch.NATIVE)
    rules: list[tuple[int, str, tuple[object, ...]]] = [
        # libseccomp refuses a rule whose action is the default one: state the refusal
        (eperm, "socket", (sc.Arg(0, sc.NE, AF_UNIX),)),
        (eperm, "socketpair", (sc.Arg(0, sc.NE, AF_UNIX),)),
        # one rule per flag: libseccomp ORs the rules of a syscall ("any of these bits set")
        *((eperm, "clone", (sc.Arg(0, sc.MASKED_EQ, bit, bit),))
          for bit in (1 << i for i in range(32)) if CLONE_NS_FLAGS & bit),
        (sc.ERRNO(errno.ENOSYS), "clone3", ()),  # flags sit behind a pointer: libc falls back
        *((eperm, name, ()) for name in DENIED),
    ]
    for action, name, args in rules:
        try:
            filt.add_rule(action, name, *args)
        except OSError as exc:  # e.g. a libseccomp too old to know the name
            raise UnsupportedArch(f"libseccomp cannot filter {name!r} on {arch}: "
                                  f"{exc.strerror}") from None
    fd = os.memfd_create("seccomp-bpf")
    with open(fd, "r+b", buffering=0) as fh:
        filt.export_bpf(fh)
        fh.seek(0)
        return fh.read()


def supported() -> bool:
    """A filter can be built for this machine and the kernel has seccomp filters."""
    if platform.machine() not in ARCHES or not kernel_supports():
        return False
    try:
        _libseccomp()
    except UnsupportedArch:
        return False
    return True


def kernel_supports() -> bool:
    try:
        with open("/proc/self/status") as fh:
            return any(line.startswith("Seccomp:") for line in fh)
    except OSError:
        return False


def describe() -> dict[str, object]:
    """What the filter does, for the verdict's record and ``doctor``."""
    return {"denied": list(DENIED), "socket_families_allowed": ["AF_UNIX"],
            "clone_namespace_flags": "EPERM", "clone3": "ENOSYS", "foreign_abi": "kill"}
