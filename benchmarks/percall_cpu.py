"""Per-call cost of the judged path on the CPU, one tree against another, side by side.

    python benchmarks/percall_cpu.py --tree before=/tmp/before --tree after=. --largest 2

Builds FlashInfer-Bench's rmsnorm_h4096 (the vendored definition) with its ``--largest``
workloads (batch 14,509 x 4096 bf16 and down) and an honest torch solution, then runs
``sandboxharness run --local`` from each tree on a fresh copy (default policy, process
sandbox, the same seed), one after the other in this process. Prints the machine and, per
tree, the wall time, each stage's time from the event log, the rest (the CLI's start, static
analysis, the reference's own timed calls, which no stage reports) and the decision; a tree is any
checkout of this repository (``git worktree add``). Each tree runs under an interpreter of its
own (a venv whose path puts the tree first, then this environment's packages), so the
sandboxed workers, which start isolated (``python -I``), import the same tree as the host.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIB = REPO / "tests" / "data" / "fib"
HONEST = """import torch

def run(hidden_states, weight):
    x = hidden_states.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return y.to(hidden_states.dtype)
"""


def build(root: Path, largest: int) -> Path:
    for sub in ("definitions/rmsnorm", "workloads/rmsnorm", "solutions/rmsnorm_h4096"):
        (root / sub).mkdir(parents=True)
    shutil.copy(FIB / "definitions/rmsnorm/rmsnorm_h4096.json", root / "definitions/rmsnorm")
    rows = (FIB / "workloads/rmsnorm/rmsnorm_h4096.jsonl").read_text().splitlines()
    rows.sort(key=lambda r: -json.loads(r)["workload"]["axes"]["batch_size"])
    (root / "workloads/rmsnorm/rmsnorm_h4096.jsonl").write_text("\n".join(rows[:largest]) + "\n")
    solution = {"name": "honest_torch", "definition": "rmsnorm_h4096", "author": "bench",
                "spec": {"language": "python", "target_hardware": ["cpu"],
                         "entry_point": "main.py::run", "dependencies": [],
                         "destination_passing_style": False},
                "sources": [{"path": "main.py", "content": HONEST}]}
    (root / "solutions/rmsnorm_h4096/honest_torch.json").write_text(json.dumps(solution))
    return root


def interpreter(tree: Path, into: Path) -> Path:
    """A venv seeing ``tree``'s package first, then this environment's site-packages."""
    import site

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(into)], check=True)
    py = into / "bin" / "python"
    sp = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"],
                        check=True, capture_output=True, text=True).stdout.strip()
    Path(sp, "aa_tree.pth").write_text(f"{tree}\n")
    Path(sp, "zz_deps.pth").write_text(f"{site.getsitepackages()[0]}\n")
    return py


def run_tree(tree: Path, ds: Path, policy: Path | None) -> dict[str, Any]:
    events = ds.parent / "events.jsonl"
    py = interpreter(tree, ds.parent / "venv")
    cmd = [str(py), "-m", "sandboxharness.cli", "run", "--local", str(ds),
           "--backend", "process", "--seed", "1", "--jobs", "1", "--json",
           "--log-file", str(events), "--log-level", "info"]
    if policy is not None:
        cmd += ["--policy", str(policy)]
    # the analysers (bandit, semgrep) are this environment's
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    t0 = time.monotonic()
    res = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    stages: dict[str, float] = {}
    host: dict[str, float] = {}
    decision = ""
    for line in events.read_text().splitlines() if events.exists() else []:
        e = json.loads(line)
        if e.get("event") == "stage.end":
            stages[e.get("stage", "?")] = float(e.get("duration_s") or 0.0)
            host.update(e.get("host_s") or {})
        if e.get("event") == "candidate.end":
            decision = f"{e.get('decision', '')} {e.get('reasons', '')}".strip()
    return {"rc": res.returncode, "wall_s": wall, "stages": stages, "host": host,
            "decision": decision,
            "err": res.stderr[-400:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH of a checkout")
    ap.add_argument("--largest", type=int, default=2, help="the N largest workloads")
    ap.add_argument("--policy", type=Path, default=None)
    args = ap.parse_args()
    trees = [(n, Path(p).resolve()) for n, _, p in (t.partition("=") for t in args.tree)]
    print(f"# Per-call cost on the CPU ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)\n")
    print(f"Machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; rmsnorm_h4096, "
          f"its {args.largest} largest FIB workloads, honest torch solution, "
          f"{'default policy' if args.policy is None else args.policy}, process sandbox, "
          "seed 1, --jobs 1.\n")
    print("| tree | wall s | compile | correctness | sanitizer | benchmark | rest | decision |")
    print("|---|---|---|---|---|---|---|---|")
    base = Path(tempfile.mkdtemp(prefix="percall-"))
    hosts: dict[str, dict[str, float]] = {}
    for name, tree in trees:
        ds = build(base / name / "ds", args.largest)
        r = run_tree(tree, ds, args.policy)
        st = r["stages"]

        def cell(key: str, st: dict[str, float] = st) -> str:
            return f"{st[key]:.1f}" if key in st else "-"

        rest = r["wall_s"] - sum(st.get(k, 0.0) for k in ("compile", "correctness",
                                                            "sanitizer", "benchmark"))
        print(f"| {name} | {r['wall_s']:.1f} | {cell('compile')} | {cell('correctness')} | "
              f"{cell('sanitizer')} | {cell('benchmark')} | {rest:.1f} | "
              f"{r['decision'] or r['rc']} |", flush=True)
        hosts[name] = r["host"]
        if r["rc"] not in (0, 1):
            print(f"\n{name}: exit {r['rc']}: {r['err']}\n", flush=True)
    for name, host in hosts.items():  # trees that record it (``host_s`` of the verdict)
        if host:
            print(f"\n{name}, where the time went (s): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in host.items()))
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
