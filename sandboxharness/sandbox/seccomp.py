"""The worker's seccomp filter, built as classic BPF in pure Python (no libseccomp needed).

A deny list on top of the kernel's defaults: syscalls that reach kernel attack surface the
worker never needs (namespaces, mounts, tracing, keyrings, BPF, io_uring, module loading...)
return ``EPERM``; ``socket``/``socketpair`` are allowed for ``AF_UNIX`` only (CUDA needs
Unix sockets; every other family gets ``EPERM``); ``clone`` with namespace flags gets
``EPERM``; ``clone3`` gets ``ENOSYS`` so that libc falls back to ``clone`` (whose flags a
filter can read). A foreign syscall ABI (i386 or x32 on x86_64) is refused outright.

The program is built on the host and handed to the sandbox init as bytes; installing it is
``prctl(PR_SET_NO_NEW_PRIVS)`` + ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog)``.
"""

from __future__ import annotations

import errno
import platform
import struct

# -- BPF opcodes and seccomp return values -------------------------------------------------
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
RET_KILL_PROCESS = 0x80000000
RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000

# offsets in struct seccomp_data
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16

AF_UNIX = 1
X32_SYSCALL_BIT = 0x40000000
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

# Syscall numbers per architecture (checked against libseccomp in tests/unit).
_X86_64: dict[str, int] = {
    "socket": 41, "socketpair": 53, "clone": 56, "clone3": 435,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "process_madvise": 440,
    "pidfd_getfd": 438, "kcmp": 312, "unshare": 272, "setns": 308, "mount": 165,
    "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248,
    "request_key": 249, "personality": 135, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "fanotify_init": 300, "lookup_dcookie": 212, "kexec_load": 246,
    "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179,
    "quotactl_fd": 443, "syslog": 103, "vhangup": 153, "settimeofday": 164,
    "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305, "sethostname": 170,
    "setdomainname": 171,
}
_AARCH64: dict[str, int] = {
    "socket": 198, "socketpair": 199, "clone": 220, "clone3": 435,
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "process_madvise": 440,
    "pidfd_getfd": 438, "kcmp": 272, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39,
    "pivot_root": 41, "chroot": 51, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "bpf": 280,
    "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "keyctl": 219, "add_key": 217, "request_key": 218,
    "personality": 92, "open_by_handle_at": 265, "name_to_handle_at": 264,
    "fanotify_init": 262, "lookup_dcookie": 18, "kexec_load": 104, "kexec_file_load": 294,
    "init_module": 105, "finit_module": 273, "delete_module": 106, "swapon": 224,
    "swapoff": 225, "reboot": 142, "acct": 89, "quotactl": 60, "quotactl_fd": 443,
    "syslog": 116, "vhangup": 58, "settimeofday": 170, "clock_settime": 112, "adjtimex": 171,
    "clock_adjtime": 266, "sethostname": 161, "setdomainname": 162,
}
ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, _X86_64),   # AUDIT_ARCH_X86_64
    "aarch64": (0xC00000B7, _AARCH64),  # AUDIT_ARCH_AARCH64
}


class UnsupportedArch(Exception):
    """No syscall table for this machine: the caller degrades (and records a warning)."""


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _errno(err: int) -> int:
    return _RET_ERRNO | (err & 0xFFFF)


def build_filter(arch: str | None = None) -> bytes:
    """The filter program for ``arch`` (default: this machine) as packed ``sock_filter``s."""
    arch = arch or platform.machine()
    if arch not in ARCHES:
        raise UnsupportedArch(f"no seccomp syscall table for {arch!r}")
    audit_arch, table = ARCHES[arch]
    eperm = _errno(errno.EPERM)
    prog = [
        _ins(_LD_W_ABS, _OFF_ARCH),
        _ins(_JEQ_K, audit_arch, jt=1),
        _ins(_RET_K, RET_KILL_PROCESS),          # foreign ABI (e.g. int 0x80 on x86_64)
        _ins(_LD_W_ABS, _OFF_NR),
    ]
    if arch == "x86_64":
        prog += [_ins(_JGE_K, X32_SYSCALL_BIT, jf=1), _ins(_RET_K, eperm)]
    for name in ("socket", "socketpair"):
        prog += [
            _ins(_JEQ_K, table[name], jf=4),
            _ins(_LD_W_ABS, _OFF_ARG0),          # the family (an int: the low word)
            _ins(_JEQ_K, AF_UNIX, jf=1),
            _ins(_RET_K, RET_ALLOW),
            _ins(_RET_K, eperm),
        ]
    prog += [
        _ins(_JEQ_K, table["clone"], jf=4),
        _ins(_LD_W_ABS, _OFF_ARG0),              # clone flags
        _ins(_JSET_K, CLONE_NS_FLAGS, jf=1),
        _ins(_RET_K, eperm),
        _ins(_RET_K, RET_ALLOW),
        _ins(_JEQ_K, table["clone3"], jf=1),
        _ins(_RET_K, _errno(errno.ENOSYS)),      # flags sit behind a pointer: make libc fall back
    ]
    for name in DENIED:
        prog += [_ins(_JEQ_K, table[name], jf=1), _ins(_RET_K, eperm)]
    prog.append(_ins(_RET_K, RET_ALLOW))
    return b"".join(prog)


def supported() -> bool:
    """A syscall table for this machine and a kernel with seccomp filters."""
    return platform.machine() in ARCHES and kernel_supports()


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
