"""The pure-Python seccomp filter: syscall tables, program shape, and behaviour in a real
process (every check installs the real filter in a child and makes real syscalls)."""

from __future__ import annotations

import json
import platform
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from sandboxharness.sandbox import seccomp

NSINIT_DIR = Path(seccomp.__file__).parent

CHILD = r"""
import ctypes, errno, json, os, socket, sys, threading
sys.path.insert(0, sys.argv[1])
import _nsinit
prog = bytes.fromhex(sys.argv[2])
buf = ctypes.create_string_buffer(prog, len(prog))
fprog = _nsinit._SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
_nsinit._prctl(_nsinit.PR_SET_NO_NEW_PRIVS, 1)
_nsinit._prctl(_nsinit.PR_SET_SECCOMP, _nsinit.SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
X86 = os.uname().machine == "x86_64"
def sys_errno(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return 0 if r != -1 else ctypes.get_errno()
def sock(family, kind=socket.SOCK_STREAM):
    try:
        socket.socket(family, kind).close()
        return 0
    except OSError as exc:
        return exc.errno
res = {
    "unshare": sys_errno(272 if X86 else 97, 0x10000000),
    "mount": sys_errno(165 if X86 else 40, 0, 0, 0, 0, 0),
    "ptrace": sys_errno(101 if X86 else 117, 16, os.getppid(), 0, 0),
    "bpf": sys_errno(321 if X86 else 280, 0, 0, 0),
    "io_uring_setup": sys_errno(425, 1, 0),
    "clone3": sys_errno(435, 0, 0),
    "clone_newns": sys_errno(56 if X86 else 220, 0x00020000 | 17, 0, 0, 0, 0),
    "inet": sock(socket.AF_INET), "inet6": sock(socket.AF_INET6),
    "packet": sock(socket.AF_PACKET, socket.SOCK_RAW),
    "netlink": sock(socket.AF_NETLINK, socket.SOCK_RAW),
    "unix": sock(socket.AF_UNIX),
    "x32": sys_errno(0x40000000 | 39) if X86 else errno.EPERM,
}
a, b = socket.socketpair(socket.AF_UNIX)
a.close(); b.close()
t = threading.Thread(target=lambda: None); t.start(); t.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
res["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
import subprocess
res["subprocess"] = subprocess.run(["/bin/true"]).returncode
print(json.dumps(res))
"""


def test_syscall_tables_match_libseccomp() -> None:
    """Our hand-written numbers agree with libseccomp's tables (where libseccomp exists)."""
    try:
        import pyseccomp
    except (ImportError, OSError) as exc:
        pytest.skip(f"libseccomp not loadable: {exc}")
    arches = {"x86_64": pyseccomp.Arch.X86_64, "aarch64": pyseccomp.Arch.AARCH64}
    for arch, (_, table) in seccomp.ARCHES.items():
        assert set(seccomp.DENIED) <= set(table)
        for name, nr in table.items():
            assert pyseccomp.resolve_syscall(arches[arch], name) == nr, (arch, name)


@pytest.mark.parametrize("arch", sorted(seccomp.ARCHES))
def test_program_shape(arch: str) -> None:
    prog = seccomp.build_filter(arch)
    assert len(prog) % 8 == 0 and len(prog) // 8 < 4096
    insns = [struct.unpack("<HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    assert insns[0] == (0x20, 0, 0, 4)  # load the arch first
    assert insns[1][3] == seccomp.ARCHES[arch][0]
    assert insns[2] == (0x06, 0, 0, seccomp.RET_KILL_PROCESS)
    assert insns[-1] == (0x06, 0, 0, seccomp.RET_ALLOW)
    for i, (code, jt, jf, _) in enumerate(insns):  # every jump lands inside the program
        if code & 0x07 == 0x05:
            assert i + 1 + max(jt, jf) < len(insns)


def test_unknown_arch_is_refused() -> None:
    with pytest.raises(seccomp.UnsupportedArch):
        seccomp.build_filter("sparc64")


@pytest.mark.skipif(not seccomp.supported(), reason=f"no syscall table for {platform.machine()}")
def test_filter_in_a_real_process() -> None:
    """Denied syscalls get EPERM, clone3 ENOSYS, non-Unix sockets EPERM; threads, fork,
    exec and Unix sockets keep working."""
    prog = seccomp.build_filter()
    cp = subprocess.run([sys.executable, "-I", "-S", "-c", CHILD, str(NSINIT_DIR), prog.hex()],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    res = json.loads(cp.stdout)
    eperm, enosys = 1, 38
    for name in ("unshare", "mount", "ptrace", "bpf", "io_uring_setup", "clone_newns", "inet",
                 "inet6", "packet", "netlink", "x32"):
        assert res[name] == eperm, (name, res)
    assert res["clone3"] == enosys
    assert res["unix"] == 0
    assert res["fork"] == 7
    assert res["subprocess"] == 0
