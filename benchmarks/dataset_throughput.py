"""A whole dataset, side by side: FlashInfer-Bench's runners and ``run --local`` (every stage).

    python benchmarks/dataset_throughput.py --dataset kernels/gpu --solutions a,b --jobs 1,4 --fib

Each configuration runs on a fresh copy of the dataset (no traces), one after the other in the
same process, so the ratios are measured side by side. Prints markdown: the machine, the wall
time and traces/s of each configuration, and for ours each candidate's stage times against
its floor (compile + the slowest sanitizer tool + the benchmark stage), so what is not the
floor shows up.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandboxharness._internal.host import describe
from sandboxharness.api import default_policy
from sandboxharness.dataset import RunOptions, run_dataset
from sandboxharness.intake import load_policy


def _copy(src: Path, into: Path, name: str) -> Path:
    dst = into / name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("traces"))
    return dst


def _fib(ds: Path, solutions: list[str], isolated: bool) -> dict[str, Any]:
    cmd = [sys.executable, "-c", "from flashinfer_bench.cli.main import cli; cli()", "run",
           "--local", str(ds)]
    if solutions:
        cmd += ["--solutions", *solutions]
    if isolated:
        cmd.append("--use-isolated-runner")
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    traces = sum(1 for p in (ds / "traces").rglob("*.jsonl") for _ in p.open())
    return {"wall_s": wall, "traces": traces, "rc": res.returncode,
            "tail": (res.stderr or res.stdout)[-300:]}


def _stage_s(verdict: Any, name: str) -> float:
    s = verdict.stage(name)
    return float(s.duration_s) if s else 0.0


def _ours(ds: Path, solutions: list[str], jobs: int, policy_path: str | None) -> dict[str, Any]:
    policy = load_policy(policy_path) if policy_path else default_policy()
    t0 = time.monotonic()
    def progress(event: Any) -> None:  # a cut-off run still says how far it got
        if event.kind == "done":
            o = event.outcome
            print(f"  done {o.task.solution} {o.wall_s:.1f} s", file=sys.stderr, flush=True)

    summary = run_dataset(ds, RunOptions(policy=policy, jobs=jobs, solutions=solutions, seed=1),
                          on_event=progress)
    wall = time.monotonic() - t0
    rows = []
    for o in summary.outcomes:
        if o.verdict is None:
            rows.append({"solution": o.task.solution, "error": str(o.error)[:120]})
            continue
        v = o.verdict
        tools = (v.stage("sanitizer").details.get("tools", {}) if v.stage("sanitizer") else {})
        slowest = max((float(t.get("wall_s", 0.0)) for t in tools.values()), default=0.0)
        floor = _stage_s(v, "compile") + slowest + _stage_s(v, "benchmark")
        rows.append({"solution": o.task.solution, "decision": v.decision, "wall_s": o.wall_s,
                     "stages": {s.stage.value: round(s.duration_s, 2) for s in v.stages},
                     "floor_s": floor})
    return {"wall_s": wall, "traces": sum(o.traces for o in summary.outcomes), "rows": rows,
            "exit": summary.exit_code}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True, type=Path)
    ap.add_argument("--solutions", default="")
    ap.add_argument("--jobs", default="1,4")
    ap.add_argument("--policy", default=None)
    ap.add_argument("--fib", action="store_true", help="also FlashInfer-Bench's persistent runner")
    ap.add_argument("--fib-isolated", action="store_true", help="and its isolated runner")
    args = ap.parse_args()
    sols = [s for s in args.solutions.split(",") if s]
    env = describe()
    print(f"# dataset throughput, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n")
    print(f"- machine: {platform.node()}, {env['platform']}, device {env['device']}")
    print(f"- torch {env['torch']}, triton {env['triton']}, harness {env['harness_version']}, "
          f"policy {args.policy or 'default.yaml'}")
    print(f"- dataset {args.dataset}, solutions {sols or 'all'}\n")
    results: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="shx-throughput-") as tmp:
        base = Path(tmp)
        if args.fib:
            for isolated in (False, True)[: 2 if args.fib_isolated else 1]:
                name = "FIB isolated" if isolated else "FIB persistent"
                results.append((name, _fib(_copy(args.dataset, base, name.replace(" ", "-")),
                                           sols, isolated)))
                print(f"  {name}: {results[-1][1]['wall_s']:.1f} s", file=sys.stderr,
                      flush=True)
        for jobs in [int(j) for j in args.jobs.split(",")]:
            results.append((f"ours, --jobs {jobs}",
                            _ours(_copy(args.dataset, base, f"ours-{jobs}"), sols, jobs,
                                  args.policy)))
            print(f"  {results[-1][0]}: {results[-1][1]['wall_s']:.1f} s", file=sys.stderr,
                  flush=True)
    ref = next((r["wall_s"] for n, r in results if n == "FIB persistent"), None)
    print("| configuration | wall s | traces | traces/s | vs FIB persistent |")
    print("|---|---|---|---|---|")
    for name, r in results:
        rate = r["traces"] / r["wall_s"] if r["wall_s"] else 0.0
        ratio = f"{r['wall_s'] / ref:.2f}x" if ref else "-"
        print(f"| {name} | {r['wall_s']:.1f} | {r['traces']} | {rate:.2f} | {ratio} |")
    for name, r in results:
        if "rows" not in r:
            if r.get("rc"):
                print(f"\n{name} exited {r['rc']}: {r['tail']!r}")
            continue
        print(f"\n## {name}: per candidate\n")
        print("| solution | decision | wall s | floor s | wall/floor | stages (s) |")
        print("|---|---|---|---|---|---|")
        ratios = []
        for row in r["rows"]:
            if "error" in row:
                print(f"| {row['solution']} | error | | | | {row['error']} |")
                continue
            ratio = row["wall_s"] / row["floor_s"] if row["floor_s"] else 0.0
            ratios.append(ratio)
            print(f"| {row['solution']} | {row['decision']} | {row['wall_s']:.1f} | "
                  f"{row['floor_s']:.1f} | {ratio:.2f} | {row['stages']} |")
        if ratios:
            print(f"\nmedian wall/floor {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
