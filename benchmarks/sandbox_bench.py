"""Cost of isolation: start+teardown per sandbox backend and one honest candidate end to end.

    .venv/bin/python benchmarks/sandbox_bench.py [--repeat 5] [--out FILE.md]

Rows (each skipped, with the reason, where the backend is not available here):
  * bare start+teardown: the backend starts its process/container and the host kills it
    (process backends: a bare ``python -S`` instead of the worker; docker: the worker image's
    container, created, started, killed and removed);
  * worker round trip: the real worker started, told ``bye``, reaped (interpreter + worker
    imports + teardown);
  * end to end: Harness.evaluate of an honest Triton rmsnorm (interpreter on CPU) through the
    pipeline, static analysis off.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sandboxharness.errors import HarnessError  # noqa: E402
from sandboxharness.intake import load_definition, load_solution, load_workloads  # noqa: E402
from sandboxharness.models import Policy  # noqa: E402
from sandboxharness.models.policy import Limits  # noqa: E402
from sandboxharness.pipeline import Harness  # noqa: E402
from sandboxharness.sandbox import JobSpec, Sandbox  # noqa: E402
from sandboxharness.sandbox.process import ProcessSandbox  # noqa: E402
from sandboxharness.worker import protocol  # noqa: E402

DEFINITION = {
    "name": "rms_bench", "op_type": "rmsnorm",
    "axes": {"b": {"type": "var"}, "h": {"type": "const", "value": 128}},
    "inputs": {"x": {"shape": ["b", "h"], "dtype": "float32"},
               "w": {"shape": ["h"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["b", "h"], "dtype": "float32"}},
    "reference": "import torch\ndef run(x, w):\n"
                 "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w\n",
}
WORKLOAD = {"definition": "rms_bench", "solution": None, "evaluation": None,
            "workload": {"uuid": "b16", "axes": {"b": 16},
                         "inputs": {"x": {"type": "random"}, "w": {"type": "random"}}}}
KERNEL = '''import triton
import triton.language as tl


@triton.jit
def _k(X, W, Y, H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, H)
    x = tl.load(X + row * H + offs)
    w = tl.load(W + offs)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / H + 1e-6)
    tl.store(Y + row * H + offs, x * r * w)


def run(x, w, y):
    _k[(x.shape[0],)](x, w, y, H=x.shape[1])
'''
POLICY = Policy.model_validate({
    "name": "bench", "static": {"bandit": False, "semgrep": False, "ast_rules": False},
    "correctness": {"trials": 2, "max_workloads": 1, "heldout_values": [3]},
    "benchmark": {"warmup": 1, "iterations": 5, "sampled_checks": 1}})


def _job(root: Path) -> JobSpec:
    base = Path(tempfile.mkdtemp(prefix="shx-job-", dir=root)) / "candidate"
    dirs = {k: base / k for k in ("src", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(parents=True)
    return JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["src"],
                   out_dir=dirs["out"], tmp_dir=dirs["tmp"], limits=Limits(),
                   env={"TRITON_INTERPRET": "1"})


def bare(sandbox: Sandbox, root: Path) -> float:
    job = _job(root)
    t0 = time.perf_counter()
    if isinstance(sandbox, ProcessSandbox):
        child = sandbox.start_command(job, 60, [sys.executable, "-I", "-S", "-c", "pass"])
        child.wait(30)
    else:
        child = sandbox.start(job, 60)
    child.kill()
    return time.perf_counter() - t0


def round_trip(sandbox: Sandbox, root: Path) -> float:
    job = _job(root)
    t0 = time.perf_counter()
    child = sandbox.start(job, 120)
    child.send(protocol.encode({"op": "bye"}))
    info = child.wait(60) or child.kill()
    if info.returncode not in (0, None):
        raise HarnessError(f"worker ended with {info.returncode}: {info.stderr[-300:]}")
    return time.perf_counter() - t0


def end_to_end(sandbox: Sandbox, root: Path) -> float:
    d_path, w_path, s_path = root / "def.json", root / "wl.jsonl", root / "sol.json"
    d_path.write_text(json.dumps(DEFINITION))
    w_path.write_text(json.dumps(WORKLOAD) + "\n")
    s_path.write_text(json.dumps({
        "name": "bench", "definition": "rms_bench", "author": "bench",
        "spec": {"language": "triton", "target_hardware": ["H100"], "entry_point": "k.py::run"},
        "sources": [{"path": "k.py", "content": KERNEL}]}))
    harness = Harness(POLICY, sandbox=sandbox, workdir=root)
    t0 = time.perf_counter()
    verdict = harness.evaluate(load_definition(d_path), load_solution(s_path),
                               load_workloads(w_path), seed=1, blob_root=root)
    elapsed = time.perf_counter() - t0
    if verdict.decision != "promote":
        raise HarnessError(f"honest candidate rejected: {[r.message for r in verdict.reasons]}")
    return elapsed


def backends() -> list[tuple[str, Callable[[], Sandbox]]]:
    def docker(runtime: str) -> Callable[[], Sandbox]:
        def make() -> Sandbox:
            from sandboxharness.sandbox.docker import DockerSandbox

            return DockerSandbox(runtime=runtime)
        return make

    return [("process (plain)", lambda: ProcessSandbox(hardened=False)),
            ("process (hardened)", lambda: ProcessSandbox(hardened=True)),
            ("docker (runc)", docker("runc")), ("docker (runsc)", docker("runsc"))]


def _stats(samples: list[float]) -> str:
    if not samples:
        return "-"
    return f"{statistics.median(samples) * 1e3:8.0f} ms (min {min(samples) * 1e3:.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--e2e-repeat", type=int, default=2)
    ap.add_argument("--out", type=Path, help="also write the table (markdown) here")
    args = ap.parse_args()
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    head = [f"# sandbox_bench — {datetime.now(UTC).isoformat(timespec='seconds')}",
            f"machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} CPUs, kernel "
            f"{platform.release()}, python {platform.python_version()}, torch "
            f"{torch.__version__}, euid {os.geteuid()}, load average at start "
            f"{os.getloadavg()[0]:.2f}", "",
            "| backend | isolation | bare start+teardown | worker round trip | "
            "honest candidate end to end |", "|---|---|---|---|---|"]
    rows, notes = [], []
    with tempfile.TemporaryDirectory(prefix="shx-bench-") as tmp:
        root = Path(tmp)
        for name, make in backends():
            try:
                sandbox = make()
            except (HarnessError, ImportError) as exc:
                rows.append(f"| {name} | not available | - | - | - |")
                notes.append(f"{name}: {exc}")
                continue
            try:
                bare(sandbox, root)  # warm-up (page cache, first-use costs): not counted
                round_trip(sandbox, root)
                b = [bare(sandbox, root) for _ in range(args.repeat)]
                r = [round_trip(sandbox, root) for _ in range(args.repeat)]
                e = [end_to_end(sandbox, root) for _ in range(args.e2e_repeat)]
                layers = ", ".join(sandbox.isolation())
                rows.append(f"| {name} | {layers} | {_stats(b)} | {_stats(r)} | {_stats(e)} |")
            except HarnessError as exc:
                rows.append(f"| {name} | error | - | - | - |")
                notes.append(f"{name}: {exc}")
            finally:
                close = getattr(sandbox, "close", None)
                if callable(close):
                    close()
            print(rows[-1], flush=True)
    head[1] += f", at end {os.getloadavg()[0]:.2f}"
    text = "\n".join(head + rows + [""] + [f"- {n}" for n in notes]) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
