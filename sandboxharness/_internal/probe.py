"""What this machine offers for isolation and GPU work, found by really trying.

Every check runs the real thing in a child process (a namespace, a seccomp filter, a
cgroup, the hardened sandbox itself) rather than reading version numbers; a failed check
says why. ``namespaces()`` is cached: the process backend's ``auto`` choice asks it.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import platform
import shutil
import socket
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import HarnessError
from . import proc

NSINIT_DIR = str(Path(__file__).resolve().parents[1] / "sandbox")
CUDA_BIN_DIRS = ("/usr/local/cuda/bin", "/opt/nvidia/nsight-compute", "/usr/local/cuda/nsight-compute")


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class MachineReport:
    date: str
    host: str
    kernel: str
    arch: str
    python: str
    euid: int
    namespaces: dict[str, bool]
    """Each namespace type, created for real inside a new user namespace."""
    hardened_sandbox: Check
    """The process backend's full hardened launch (namespaces, mounts, uid map, seccomp)."""
    seccomp: Check
    libseccomp: str | None
    cgroups: dict[str, Any]
    docker_engine: Check
    docker_runtimes: list[str]
    docker_backend: Check
    runsc: Check
    gpu: dict[str, Any]
    cuda_in_sandbox: Check
    """CUDA and Triton inside the hardened sandbox (only tried where torch sees a GPU)."""
    tools: dict[str, str | None]
    auto_backend: str
    auto_reason: str
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    try:
        rc, out, _ = _python(_NS_SCRIPT)
        return {k: bool(v) for k, v in json.loads(out).items()} if rc == 0 else {}
    except (HarnessError, ValueError):
        return {}


def _in_sandbox(script: str, *, gpu: bool = False, timeout: float = 30.0,
                seccomp_on: bool = True) -> tuple[dict[str, Any] | None, str]:
    """Run ``script`` (it writes one JSON object to fd 1) in the hardened process sandbox."""
    from ..models.policy import Limits
    from ..sandbox.interface import JobSpec
    from ..sandbox.process import ProcessSandbox

    with tempfile.TemporaryDirectory(prefix="shx-probe-") as tmp:
        dirs = {k: Path(tmp) / "job" / k for k in ("src", "out", "tmp")}
        for d in dirs.values():
            d.mkdir(parents=True)
        job = JobSpec(role="probe", src_dir=dirs["src"], data_dir=dirs["src"],
                      out_dir=dirs["out"], tmp_dir=dirs["tmp"], limits=Limits(), gpu=gpu)
        try:
            sandbox = ProcessSandbox(hardened=True, use_cgroups=False, use_seccomp=seccomp_on)
            argv = [sys.executable, "-I", *([] if gpu else ["-S"]), "-c", script]
            child = sandbox.start_command(job, timeout, argv)
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
    from ..sandbox import seccomp

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
    from ..sandbox import cgroups

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
        from ..sandbox.docker import DockerSandbox
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


def _which(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in CUDA_BIN_DIRS:
        cand = Path(d) / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


def gpu_report() -> dict[str, Any]:
    smi = _which("nvidia-smi")
    gpus: list[str] = []
    if smi:
        try:
            cp = proc.run([smi, "--query-gpu=name,driver_version,memory.total",
                           "--format=csv,noheader"], 20.0)
            gpus = [ln.strip() for ln in cp.stdout.splitlines() if ln.strip()]
        except HarnessError as exc:
            gpus = [f"nvidia-smi failed: {exc}"]
    try:
        import torch

        cuda = bool(torch.cuda.is_available())
        device = torch.cuda.get_device_name(0) if cuda else None
        torch_v: str | None = str(torch.__version__)
        cuda_v = torch.version.cuda
    except ImportError:
        cuda, device, torch_v, cuda_v = False, None, None, None
    nodes = sorted(str(p) for p in Path("/dev").glob("nvidia*"))
    return {"nvidia_smi": smi, "gpus": gpus, "torch": torch_v, "torch_cuda": cuda,
            "torch_cuda_version": cuda_v, "device": device, "device_nodes": nodes}


def auto_choice() -> tuple[str, str]:
    """The backend ``auto`` resolves to, and why (same order as ``select_backend``)."""
    ns = namespaces()
    if ns.ok:
        return "process (hardened)", "user namespaces work: " + ns.detail
    try:
        from ..sandbox.docker import DockerSandbox

        ok, why = DockerSandbox.available()
    except ImportError as exc:
        ok, why = False, str(exc)
    if ok:
        return "docker", f"no user namespaces ({ns.detail}); {why}"
    return "process (plain)", f"no user namespaces ({ns.detail}); docker: {why}"


def report() -> MachineReport:
    engine, runtimes, backend, runsc = docker_report()
    ns = namespaces()
    gpu = gpu_report()
    cuda = cuda_in_sandbox() if gpu["torch_cuda"] else Check(False, "no CUDA device")
    auto, why = auto_choice()
    warnings = []
    if not ns.ok:
        warnings.append(f"hardened process sandbox unavailable: {ns.detail}")
    return MachineReport(
        date=datetime.now(UTC).isoformat(timespec="seconds"), host=socket.gethostname(),
        kernel=platform.release(), arch=platform.machine(), python=sys.version.split()[0],
        euid=os.geteuid(), namespaces=namespace_kinds(), hardened_sandbox=ns,
        seccomp=seccomp_check(), libseccomp=ctypes.util.find_library("seccomp"),
        cgroups=cgroup_report(), docker_engine=engine, docker_runtimes=runtimes,
        docker_backend=backend, runsc=runsc, gpu=gpu, cuda_in_sandbox=cuda,
        tools={t: _which(t) for t in ("compute-sanitizer", "ncu", "nvcc", "unshare", "bwrap")},
        auto_backend=auto, auto_reason=why, warnings=warnings,
    )
