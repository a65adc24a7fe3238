"""What this machine offers the sandbox backends, found by really trying.

Every check runs the real thing in a child process (a namespace, a seccomp filter, a
cgroup, the hardened sandbox itself) rather than reading version numbers; a failed check
says why. ``namespaces()`` is cached: the process backend's ``auto`` choice asks it. The
hardened probes start the launcher directly (``_launch`` + ``_child``), not through
``ProcessSandbox``, which itself asks ``namespaces()``: the arrows point one way.
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .._internal import proc
from ..errors import HarnessError
from ..models.policy import Limits
from . import _child, cgroups, seccomp
from ._launch import Launch, LaunchSettings
from .interface import JobSpec

NSINIT_DIR = str(Path(__file__).resolve().parent)


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str = ""


_NS_SCRIPT = r"""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
flags = {"user": 0, "mount": 0x20000, "uts": 0x4000000, "ipc": 0x8000000,
         "pid": 0x20000000, "net": 0x40000000, "cgroup": 0x2000000}
out = {}
for name, flag in flags.items():
    pid = os.fork()
    if pid == 0:
        ok = libc.unshare(0x10000000 | flag) == 0
        if ok and name == "pid":
            child = os.fork()
            if child == 0:
                os._exit(0 if os.getpid() == 1 else 1)
            ok = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0
        os._exit(0 if ok else 1)
    out[name] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
print(json.dumps(out))
"""

_SECCOMP_SCRIPT = r"""
import ctypes, errno, json, os, socket, sys
sys.path.insert(0, sys.argv[1])
import _nsinit
prog = bytes.fromhex(sys.argv[2])
buf = ctypes.create_string_buffer(prog, len(prog))
fprog = _nsinit._SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
_nsinit._prctl(_nsinit.PR_SET_NO_NEW_PRIVS, 1)
_nsinit._prctl(_nsinit.PR_SET_SECCOMP, _nsinit.SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
libc = ctypes.CDLL(None, use_errno=True)
res = {"unshare": libc.unshare(0) == -1 and ctypes.get_errno() == errno.EPERM}
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    res["inet"] = False
except PermissionError:
    res["inet"] = True
socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
res["unix"] = True
print(json.dumps(res))
"""

_SANDBOX_SCRIPT = r"""
import json, os, socket
res = {"uid": os.getuid(), "pid": os.getpid(), "hostname": socket.gethostname()}
try:
    open("/shx-probe-write", "w")
    res["root_writable"] = True
except OSError:
    res["root_writable"] = False
res["net"] = sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []
os.write(1, json.dumps(res).encode())
"""


def _python(script: str, *args: str, timeout: float = 30.0) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory(prefix="shx-probe-") as tmp:
        cp = proc.run([sys.executable, "-I", "-S", "-c", script, *args], timeout,
                      env={"PATH": "/usr/bin:/bin", "HOME": tmp}, cwd=Path(tmp))
    return cp.returncode, cp.stdout, cp.stderr


def namespace_kinds() -> dict[str, bool]:
    """Each namespace type, created for real inside a new user namespace ({} if none)."""
    try:
        rc, out, _ = _python(_NS_SCRIPT)
        return {k: bool(v) for k, v in json.loads(out).items()} if rc == 0 else {}
    except (HarnessError, ValueError):
        return {}


def seccomp_filter() -> tuple[bytes | None, str]:
    """The syscall filter for this kernel and architecture, or None and why there is none."""
    if not seccomp.kernel_supports():
        return None, "this kernel has no seccomp filters"
    try:
        return seccomp.build_filter(), ""
    except seccomp.UnsupportedArch as exc:
        return None, str(exc)


def _in_sandbox(script: str, *, gpu: bool = False, timeout: float = 30.0,
                seccomp_on: bool = True) -> tuple[dict[str, Any] | None, str]:
    """Run ``script`` (it writes one JSON object to fd 1) in the hardened process sandbox."""
    with tempfile.TemporaryDirectory(prefix="shx-probe-") as tmp:
        dirs = {k: Path(tmp) / "job" / k for k in ("src", "out", "tmp")}
        for d in dirs.values():
            d.mkdir(parents=True)
        job = JobSpec(role="probe", src_dir=dirs["src"], data_dir=dirs["src"],
                      out_dir=dirs["out"], tmp_dir=dirs["tmp"], limits=Limits(), gpu=gpu)
        # as ProcessSandbox(hardened=True, use_cgroups=False): no job cgroup for a probe
        settings = LaunchSettings(hardened=True,
                                  seccomp_filter=seccomp_filter()[0] if seccomp_on else None)
        try:
            argv = [sys.executable, "-I", *([] if gpu else ["-S"]), "-c", script]
            child = _child.start(Launch(settings, job, argv), timeout)
        except HarnessError as exc:
            return None, str(exc)
        data = b""
        try:
            while chunk := child.recv(65536, timeout):
                data += chunk
        except (TimeoutError, OSError):
            pass
        info = child.kill()
    try:
        return json.loads(data), ""
    except ValueError:
        return None, (f"probe process failed (status {info.returncode}): "
                      f"{info.stderr.strip()[-300:]}")


@lru_cache(maxsize=1)
def namespaces() -> Check:
    """Can the process backend's hardened variant really start a process here?"""
    if platform.system() != "Linux":
        return Check(False, "not Linux")
    res, why = _in_sandbox(_SANDBOX_SCRIPT)
    if res is None:
        return Check(False, why)
    problems = [what for what, bad in (
        ("runs as uid 0", res.get("uid") == 0), ("not pid 2 of a new pid namespace",
                                                  res.get("pid") != 2),
        ("root filesystem writable", res.get("root_writable")),
        ("network interfaces other than lo", set(res.get("net", [])) - {"lo"}),
    ) if bad]
    if problems:
        return Check(False, "; ".join(problems))
    return Check(True, f"worker uid {res['uid']}, pid {res['pid']}, hostname "
                       f"{res['hostname']!r}, net {res.get('net')}, read-only root")


_CUDA_SCRIPT = r"""
import json, os, socket
import torch
res = {"device": torch.cuda.get_device_name(0)}
a = torch.randn(1024, 1024, device="cuda")
res["matmul"] = bool(torch.allclose((a @ a).cpu(), a.cpu() @ a.cpu(), rtol=1e-2, atol=1e-1))
try:
    import triton, triton.language as tl

    @triton.jit
    def add_one(X, Y, N: tl.constexpr):
        offs = tl.arange(0, N)
        tl.store(Y + offs, tl.load(X + offs) + 1)

    x = torch.arange(256, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    add_one[(1,)](x, y, N=256)
    torch.cuda.synchronize()
    res["triton"] = bool(torch.equal(y, x + 1))
except ImportError:
    res["triton"] = None
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    res["inet"] = "allowed"
except PermissionError:
    res["inet"] = "EPERM"
os.write(1, json.dumps(res).encode())
"""


def cuda_in_sandbox() -> Check:
    """A CUDA matmul and a Triton kernel inside the hardened sandbox (seccomp on), as a GPU job."""
    if not namespaces().ok:
        return Check(False, "no hardened sandbox here")
    res, why = _in_sandbox(_CUDA_SCRIPT, gpu=True, timeout=300.0)
    if res is None:
        return Check(False, why)
    ok = res.get("matmul") is True and res.get("triton") is not False
    return Check(ok, f"{res.get('device')}: matmul {res.get('matmul')}, triton "
                     f"{res.get('triton')}, AF_INET {res.get('inet')}")


def seccomp_check() -> Check:
    """The process backend's filter, installed in a child: does it refuse what it should?"""
    try:
        prog = seccomp.build_filter()
    except seccomp.UnsupportedArch as exc:
        return Check(False, str(exc))
    try:
        rc, out, err = _python(_SECCOMP_SCRIPT, NSINIT_DIR, prog.hex())
    except HarnessError as exc:
        return Check(False, str(exc))
    if rc != 0:
        return Check(False, f"filter could not be installed: {err.strip()[-300:]}")
    res = json.loads(out)
    if not all(res.values()):
        return Check(False, f"filter installed but not effective: {res}")
    return Check(True, f"{len(prog) // 8} BPF instructions ({platform.machine()}); unshare "
                       "-> EPERM, AF_INET -> EPERM, AF_UNIX allowed")


def cgroup_report() -> dict[str, Any]:
    """The controllers mounted, the ones a job cgroup would use, and one really created."""
    support = cgroups.detect()
    v1 = sorted({c for _, fs, opts in cgroups._mounts() if fs == "cgroup"
                 for c in opts if c in {"memory", "pids", "cpu", "cpuset", "cpuacct", "blkio",
                                        "devices", "freezer", "hugetlb"}})
    v2: list[str] = []
    for point, fs, _ in cgroups._mounts():
        if fs == "cgroup2":
            try:
                v2 = (Path(point) / "cgroup.controllers").read_text().split()
            except OSError:
                pass
            break
    used = {c: f"v{h.version} ({h.parent})" for c, h in support.by_controller.items()}
    created = Check(False, "no usable controller")
    if support.by_controller:
        try:
            job = cgroups.create("probe", 64, 16, support)
            job.remove()
            created = Check(True, "created and removed a job cgroup")
        except OSError as exc:
            created = Check(False, f"cannot create a job cgroup: {exc}")
    return {"v1_controllers": v1, "v2_controllers": v2, "job_controllers": used,
            "job_cgroup": asdict(created), "notes": support.notes}


def docker_report() -> tuple[Check, list[str], Check, Check]:
    """The engine, its runtimes, and the docker backend with runc and with runsc (gVisor)."""
    try:
        import docker
    except ImportError as exc:
        missing = Check(False, f"docker SDK not importable: {exc}")
        return missing, [], missing, missing
    try:
        client = docker.from_env(timeout=5)
        try:
            version = client.version().get("Version", "?")
            runtimes = sorted((client.info().get("Runtimes") or {}).keys())
        finally:
            client.close()
    except Exception as exc:  # noqa: BLE001 - any SDK/HTTP failure means "not reachable"
        why = (str(exc).strip().splitlines() or [""])[0][:200]
        down = Check(False, f"engine not reachable: {type(exc).__name__}: {why}")
        return down, [], Check(False, "no engine"), Check(False, "no engine")
    engine = Check(True, f"docker engine {version}")
    try:
        from .docker import DockerSandbox
    except ImportError as exc:
        return engine, runtimes, Check(False, f"backend not importable: {exc}"), Check(False, "")
    ok, why = DockerSandbox.available(runtime="runc")
    backend = Check(ok, why)
    if "runsc" in runtimes:
        ok_s, why_s = DockerSandbox.available(runtime="runsc")
        runsc = Check(ok_s, why_s)
    else:
        runsc = Check(False, "runsc is not registered with the engine")
    return engine, runtimes, backend, runsc
