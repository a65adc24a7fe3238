"""ctypes straight to libc: call a syscall the sandbox must refuse (chosen by the test) and
raise with the errno if the kernel said no."""
import ctypes
import os
import platform

ATTACK = "__ATTACK__"
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
X86 = platform.machine() == "x86_64"
NR = {"ptrace": 101 if X86 else 117, "mount": 165 if X86 else 40,
      "unshare": 272 if X86 else 97, "setns": 308 if X86 else 268, "bpf": 321 if X86 else 280,
      "perf_event_open": 298 if X86 else 241, "io_uring_setup": 425, "clone": 56 if X86 else 220,
      "keyctl": 250 if X86 else 219, "userfaultfd": 323 if X86 else 282}
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17


def _sys(nr, *args):
    ret = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if ret == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{ATTACK}: {os.strerror(err)}")
    return ret


def run(x):
    if ATTACK == "ptrace_parent":
        _sys(NR["ptrace"], 16, os.getppid(), 0, 0)  # PTRACE_ATTACH
    elif ATTACK == "mount":
        src, dst, fs = (ctypes.create_string_buffer(b) for b in (b"none", b"/tmp", b"tmpfs"))
        _sys(NR["mount"], *(ctypes.addressof(b) for b in (src, dst, fs)), 0, 0)
    elif ATTACK == "unshare":
        _sys(NR["unshare"], CLONE_NEWUSER)
    elif ATTACK == "setns":
        fd = os.open("/proc/1/ns/mnt", os.O_RDONLY)
        _sys(NR["setns"], fd, 0)
    elif ATTACK == "clone_newuser":
        pid = _sys(NR["clone"], CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    elif ATTACK == "x32_unshare":
        if not X86:
            raise OSError(0, "x32 ABI only exists on x86_64")
        _sys(0x40000000 | NR["unshare"], CLONE_NEWUSER)
    elif ATTACK == "bpf":
        attr = ctypes.create_string_buffer(128)
        _sys(NR["bpf"], 0, ctypes.addressof(attr), 128)  # BPF_MAP_CREATE
    elif ATTACK == "perf_event_open":
        attr = ctypes.create_string_buffer(128)
        attr[4:8] = (128).to_bytes(4, "little")  # size
        _sys(NR["perf_event_open"], ctypes.addressof(attr), 0, -1, -1, 0)
    elif ATTACK == "io_uring_setup":
        params = ctypes.create_string_buffer(120)
        _sys(NR["io_uring_setup"], 8, ctypes.addressof(params))
    elif ATTACK == "keyctl":
        _sys(NR["keyctl"], 0, -4, 0)  # KEYCTL_GET_KEYRING_ID of the user session keyring
    elif ATTACK == "userfaultfd":
        _sys(NR["userfaultfd"], 0)
    else:
        raise ValueError(ATTACK)
    return x + 1
