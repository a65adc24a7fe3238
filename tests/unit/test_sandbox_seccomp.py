"""The seccomp filter (built with libseccomp): program shape, and behaviour in a real process
(every check installs the real filter in a child and makes real syscalls)."""

from __future__ import annotations

import errno
import json
import platform
import signal
import socket
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


# Every syscall of this machine, each made inert: a sentinel filter (installed first) answers
# ENOTRECOVERABLE to any call whose 6th argument is MAGIC, and the filter under test is stacked
# on top. The kernel runs both and keeps the most recent filter's answer among equals, so a
# call our filter refuses reports its errno, one it allows reports the sentinel's -- and
# none of them ever runs (reboot, kexec_load, vhangup... are safe to "call" even as root).
TRUTH_TABLE = r"""
import ctypes, json, sys
sys.path.insert(0, sys.argv[1])
import _nsinit, pyseccomp as sc
prog, calls, magic, sentinel = (bytes.fromhex(sys.argv[2]), json.loads(sys.argv[3]),
                                int(sys.argv[4]), int(sys.argv[5]))
guard = sc.SyscallFilter(sc.ALLOW)
for nr in sorted({nr for _, nr, _ in calls}):
    guard.add_rule(sc.ERRNO(sentinel), nr, sc.Arg(5, sc.EQ, magic))
guard.load()  # sets no_new_privs too
buf = ctypes.create_string_buffer(prog, len(prog))
fprog = _nsinit._SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
_nsinit._prctl(_nsinit.PR_SET_SECCOMP, _nsinit.SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
res = {}
for key, nr, arg0 in calls:
    r = libc.syscall(*[ctypes.c_long(a) for a in (nr, arg0, 0, 0, 0, 0, magic)])
    res[key] = "ran" if r != -1 else ctypes.get_errno()
print(json.dumps(res))
"""
MAGIC, SENTINEL = 0x5EC0FFEE5EC0FFEE, errno.ENOTRECOVERABLE
SIGCHLD = 17

# A foreign syscall ABI on x86_64: x32 getpid through syscall(), i386 getpid through int 0x80.
FOREIGN = r"""
import ctypes, mmap, sys
sys.path.insert(0, sys.argv[1])
import _nsinit
if sys.argv[2]:
    prog = bytes.fromhex(sys.argv[2])
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _nsinit._SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _nsinit._prctl(_nsinit.PR_SET_NO_NEW_PRIVS, 1)
    _nsinit._prctl(_nsinit.PR_SET_SECCOMP, _nsinit.SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
if sys.argv[3] == "x32":
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(ctypes.c_long(0x40000000 | 39))
    print("ret", r, ctypes.get_errno())
else:
    code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"  # mov eax, 20 (getpid); int 0x80; ret
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    fn = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
    print("ret", fn())
"""


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", "-c", script, str(NSINIT_DIR), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("arch", sorted(seccomp.ARCHES))
def test_program_shape(arch: str) -> None:
    """libseccomp's program: within the kernel's size limit, checks the architecture first
    (foreign ABI -> kill), every jump lands inside it."""
    prog = seccomp.build_filter(arch)
    assert len(prog) % 8 == 0 and len(prog) // 8 < 4096
    insns = [struct.unpack("<HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    assert insns[0] == (0x20, 0, 0, 4)  # load the arch first
    assert insns[1][0] == 0x15 and insns[1][3] == seccomp.ARCHES[arch]
    assert insns[2 + insns[1][2]] == (0x06, 0, 0, seccomp.RET_KILL_PROCESS)
    assert (0x06, 0, 0, seccomp.RET_ALLOW) in insns
    for i, (code, jt, jf, k) in enumerate(insns):  # every jump lands inside the program
        if code & 0x07 == 0x05:
            assert i + 1 + (k if code == 0x05 else max(jt, jf)) < len(insns)


def test_no_libseccomp_degrades(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without libseccomp there is no filter: the caller's UnsupportedArch path (a warning)."""
    monkeypatch.setitem(sys.modules, "pyseccomp", None)
    with pytest.raises(seccomp.UnsupportedArch, match="libseccomp"):
        seccomp.build_filter()
    assert not seccomp.supported()


@pytest.mark.skipif(not seccomp.supported(), reason=f"no seccomp filter on {platform.machine()}")
def test_every_syscall_answered_as_the_policy_says() -> None:
    """The whole policy, syscall by syscall on this machine: DENIED -> EPERM, clone3 ->
    ENOSYS, socket/socketpair EPERM but for AF_UNIX, clone EPERM with any namespace flag;
    every other syscall allowed."""
    import pyseccomp

    calls: list[tuple[str, int, int]] = []
    expected: dict[str, int] = {}
    for nr in range(1024):
        try:
            name = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, nr).decode()
        except ValueError:
            continue
        if name in ("socket", "socketpair"):
            for family, want in ((socket.AF_UNIX, SENTINEL), (socket.AF_INET, errno.EPERM),
                                 (socket.AF_INET6, errno.EPERM), (socket.AF_NETLINK, errno.EPERM),
                                 (socket.AF_PACKET, errno.EPERM)):
                calls.append((f"{name}({family})", nr, family))
                expected[calls[-1][0]] = want
        elif name == "clone":
            calls.append(("clone(SIGCHLD)", nr, SIGCHLD))
            expected["clone(SIGCHLD)"] = SENTINEL
            for bit in (1 << i for i in range(32)):
                if seccomp.CLONE_NS_FLAGS & bit:
                    calls.append((f"clone({bit:#x})", nr, bit | SIGCHLD))
                    expected[calls[-1][0]] = errno.EPERM
        else:
            calls.append((name, nr, 0))
            expected[name] = (errno.EPERM if name in seccomp.DENIED
                              else errno.ENOSYS if name == "clone3" else SENTINEL)
    assert len(calls) > 300 and set(seccomp.DENIED) <= set(expected)
    cp = _run(TRUTH_TABLE, seccomp.build_filter().hex(), json.dumps(calls), str(MAGIC),
              str(SENTINEL))
    assert cp.returncode == 0, cp.stderr
    res = json.loads(cp.stdout)
    wrong = {k: (res.get(k), want) for k, want in expected.items() if res.get(k) != want}
    assert not wrong, f"(got, wanted): {wrong}"


@pytest.mark.skipif(platform.machine() != "x86_64" or not seccomp.supported(),
                    reason="the x32 and i386 ABIs exist on x86_64 only")
@pytest.mark.parametrize("abi", ["x32", "i386"])
def test_foreign_abi_kills(abi: str) -> None:
    """Attack: a 32-bit syscall entry (x32 numbering, int 0x80) to dodge a 64-bit filter."""
    control = _run(FOREIGN, "", abi)
    if control.returncode != 0:
        pytest.skip(f"{abi} entry unusable on this kernel even unfiltered: {control.stderr[-200:]}")
    cp = _run(FOREIGN, seccomp.build_filter().hex(), abi)
    assert cp.returncode == -signal.SIGSYS, (cp.returncode, cp.stdout, cp.stderr[-300:])


def test_unknown_arch_is_refused() -> None:
    with pytest.raises(seccomp.UnsupportedArch):
        seccomp.build_filter("sparc64")


@pytest.mark.skipif(not seccomp.supported(), reason=f"no seccomp filter on {platform.machine()}")
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
                 "inet6", "packet", "netlink"):
        assert res[name] == eperm, (name, res)
    assert res["clone3"] == enosys
    assert res["unix"] == 0
    assert res["fork"] == 7
    assert res["subprocess"] == 0
