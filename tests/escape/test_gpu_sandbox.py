"""CUDA inside the hardened process sandbox (run on the device machine; skipped without a GPU).

The sandbox must keep CUDA usable (device nodes, driver libraries, AF_UNIX sockets under the
seccomp filter, no RLIMIT_AS) while every other layer stays in force. The escape suite
itself also runs on the device: there the pipeline makes every job a GPU job.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sandboxharness.models.policy import Limits
from sandboxharness.sandbox import JobSpec, capabilities
from sandboxharness.sandbox.process import ProcessSandbox

pytestmark = pytest.mark.gpu

CUDA_SCRIPT = r"""
import json, os, socket, sys
import torch

# Triton reads a @jit function's source from its file: put the kernel in a module (in the
# sandbox's private scratch) rather than in this -c string.
scratch = os.environ["TMPDIR"]
with open(os.path.join(scratch, "shx_add_one.py"), "w") as fh:
    fh.write("import triton, triton.language as tl\n@triton.jit\n"
             "def add_one(X, Y, N: tl.constexpr):\n"
             "    offs = tl.arange(0, N)\n"
             "    tl.store(Y + offs, tl.load(X + offs) + 1)\n")
sys.path.insert(0, scratch)
from shx_add_one import add_one

res = {"device": torch.cuda.get_device_name(0)}
a = torch.randn(2048, 2048, device="cuda")
res["matmul_ok"] = bool(torch.allclose((a @ a).cpu(), a.cpu() @ a.cpu(), rtol=1e-2, atol=1e-1))
x = torch.arange(1024, device="cuda", dtype=torch.float32)
y = torch.empty_like(x)
add_one[(1,)](x, y, N=1024)
torch.cuda.synchronize()
res["triton_ok"] = bool(torch.equal(y, x + 1))
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    res["inet"] = "allowed"
except PermissionError:
    res["inet"] = "EPERM"
res["uid"] = os.getuid()
res["net"] = sorted(os.listdir("/sys/class/net"))
res["seccomp"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")]
os.write(1, json.dumps(res).encode())
"""


def test_cuda_and_triton_work_in_the_hardened_sandbox(tmp_path: Path) -> None:
    """A CUDA matmul and a Triton kernel (compiled in the sandbox) run as a GPU job, with
    namespaces, seccomp (AF_INET refused) and an unprivileged uid in force."""
    if not capabilities.namespaces().ok:
        pytest.skip(f"no user namespaces: {capabilities.namespaces().detail}")
    dirs = {k: tmp_path / "shx-job-gpu" / "candidate" / k for k in ("src", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(parents=True)
    job = JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["src"],
                  out_dir=dirs["out"], tmp_dir=dirs["tmp"], limits=Limits(), gpu=True)
    sandbox = ProcessSandbox(hardened=True)
    child = sandbox.start_command(job, 240.0, [sys.executable, "-I", "-c", CUDA_SCRIPT])
    data = b""
    try:
        while chunk := child.recv(65536, 240.0):
            data += chunk
    except TimeoutError:
        pass
    info = child.wait(10.0) or child.kill()
    assert info.returncode == 0, info.stderr[-3000:]
    res = json.loads(data)
    assert res["matmul_ok"] and res["triton_ok"], res
    assert res["inet"] == "EPERM" and res["uid"] != 0 and res["net"] == ["lo"]
    assert res["seccomp"] == ["2"]
