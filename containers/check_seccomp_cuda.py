"""Does the Docker worker's seccomp profile let CUDA, torch and Triton work? Prints a table.

The GPU machine has no Docker, so this applies policies/seccomp/docker-worker.json the way
runc does (libseccomp, through pyseccomp) to this very process, sets no_new_privs, and then
runs what a GPU job runs: CUDA init, a torch kernel, a Triton JIT compile (ptxas in a
subprocess) and launch, an event-timed call. It also checks that the filter bites
(AF_INET socket, unshare, ptrace, io_uring -> EPERM).

    python3 containers/check_seccomp_cuda.py [--profile PATH] [--no-filter]

Exit status 0 only if every check passes.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import socket
import sys
import tempfile
import traceback
from pathlib import Path

PROFILE = Path(__file__).resolve().parents[1] / "policies" / "seccomp" / "docker-worker.json"
PR_SET_NO_NEW_PRIVS = 38


def apply(profile_path: Path) -> int:
    import pyseccomp as sc

    profile = json.loads(profile_path.read_text())
    ops = {"SCMP_CMP_EQ": sc.EQ, "SCMP_CMP_NE": sc.NE, "SCMP_CMP_MASKED_EQ": sc.MASKED_EQ,
           "SCMP_CMP_GE": sc.GE, "SCMP_CMP_GT": sc.GT, "SCMP_CMP_LE": sc.LE, "SCMP_CMP_LT": sc.LT}
    if profile["defaultAction"] != "SCMP_ACT_ERRNO":
        raise SystemExit("the profile must deny by default")
    filt = sc.SyscallFilter(defaction=sc.ERRNO(errno.EPERM))
    added = 0
    for rule in profile["syscalls"]:
        if rule["action"] == "SCMP_ACT_ALLOW":
            action = sc.ALLOW
        elif rule["action"] == "SCMP_ACT_ERRNO":
            action = sc.ERRNO(rule.get("errnoRet", errno.EPERM))
        else:
            raise SystemExit(f"unsupported action {rule['action']}")
        args = []
        for a in rule.get("args") or []:
            if a["op"] == "SCMP_CMP_MASKED_EQ":  # runc: value = mask, valueTwo = datum
                args.append(sc.Arg(a["index"], sc.MASKED_EQ, a["value"], a.get("valueTwo", 0)))
            else:
                args.append(sc.Arg(a["index"], ops[a["op"]], a["value"]))
        for name in rule["names"]:
            try:
                filt.add_rule(action, name, *args)
                added += 1
            except (ValueError, RuntimeError, OSError):
                pass  # not a syscall on this architecture (runc skips these too)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit("prctl(NO_NEW_PRIVS) failed")
    filt.load()
    return added


def check_denied() -> dict[str, str]:
    out = {}
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        out["socket(AF_INET)"] = "ALLOWED"
    except OSError as exc:
        out["socket(AF_INET)"] = errno.errorcode.get(exc.errno or 0, "?")
    libc = ctypes.CDLL(None, use_errno=True)
    for name, nr in (("unshare", 272), ("ptrace", 101), ("io_uring_setup", 425), ("bpf", 321)):
        rc = libc.syscall(nr, 0, 0, 0, 0)
        out[name] = "ALLOWED" if rc != -1 else errno.errorcode.get(ctypes.get_errno(), "?")
    return out


def run_gpu_work() -> list[tuple[str, str]]:
    results: list[tuple[str, str]] = []

    def step(name: str, fn) -> None:  # type: ignore[no-untyped-def]
        try:
            detail = fn()
            results.append((name, f"ok {detail or ''}".strip()))
        except Exception as exc:  # noqa: BLE001  a table row, not a crash
            results.append((name, f"FAIL {type(exc).__name__}: {exc}"[:200]))
            traceback.print_exc()

    import torch

    step("cuda init", lambda: torch.cuda.get_device_name(0))
    step("torch matmul", lambda: float((torch.randn(512, 512, device="cuda") @
                                         torch.randn(512, 512, device="cuda")).sum().item()))

    def triton_kernel() -> str:
        import triton
        import triton.language as tl

        @triton.jit
        def add(X, Y, Z, N: tl.constexpr):
            offs = tl.arange(0, N)
            tl.store(Z + offs, tl.load(X + offs) + tl.load(Y + offs))

        x = torch.randn(1024, device="cuda")
        y = torch.randn(1024, device="cuda")
        z = torch.empty_like(x)
        add[(1,)](x, y, z, N=1024)
        torch.cuda.synchronize()
        return f"max err {float((z - x - y).abs().max()):.1e}"

    step("triton jit+launch", triton_kernel)

    def events() -> str:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        x = torch.randn(4096, 4096, device="cuda")
        a.record()
        x @ x
        b.record()
        torch.cuda.synchronize()
        return f"{a.elapsed_time(b):.3f} ms"

    step("cuda events", events)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", type=Path, default=PROFILE)
    parser.add_argument("--no-filter", action="store_true")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="triton-cache-")
    os.environ["TRITON_CACHE_DIR"] = cache  # a fresh cache: the compile really runs
    added = 0 if args.no_filter else apply(args.profile)
    with open("/proc/self/status") as fh:
        seccomp = [ln.split()[1] for ln in fh if ln.startswith("Seccomp:")]
    rows = [("filter", f"{'off' if args.no_filter else 'on'} ({added} rules, Seccomp: "
                       f"{seccomp[0] if seccomp else '?'})")]
    rows += run_gpu_work()
    rows += [(f"denied {k}", v) for k, v in check_denied().items()]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    bad = [r for r in rows if r[1].startswith("FAIL")]
    if not args.no_filter:
        bad += [r for r in rows if r[0].startswith("denied") and r[1] != "EPERM"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
