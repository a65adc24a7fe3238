"""A whole dataset, side by side: FlashInfer-Bench's runners and ``run --local`` (every stage).

    python benchmarks/dataset_throughput.py --fib-set --jobs 4 --fib --budget-s 480
    python benchmarks/dataset_throughput.py --dataset kernels/gpu --solutions a,b --jobs 1,4

``--fib-set`` builds the trace set of issue 17 from the vendored FlashInfer-Bench samples
(tests/data/fib): rmsnorm_h4096 with all its workloads and the three rmsnorm solutions of
kernels/gpu, gemm_n4096_k4096 with all its workloads and FIB's example agent solution.

Each configuration runs on a fresh copy of the dataset (no traces), one after the other in the
same process, so the ratios are measured side by side. Ours is the real CLI (``sandboxharness
run --local`` with the default policy unless ``--policy``, an audit log and an event log);
afterwards its audit log is verified by ``audit verify`` and its traces are read back by
FlashInfer-Bench's own ``TraceSet.from_path``. Prints markdown: the machine, the wall time
and traces/s of each configuration, and for ours each candidate's stage times against its
floor (compile + the slowest sanitizer tool + the benchmark stage).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandboxharness._internal.host import describe

REPO = Path(__file__).resolve().parent.parent
FIB_SET = {"rmsnorm_h4096": "rmsnorm", "gemm_n4096_k4096": "gemm"}


def build_fib_set(into: Path) -> Path:
    """The issue-17 trace set, in FIB's layout (definitions/workloads by op type)."""
    root = into / "fib-set"
    for name, op in FIB_SET.items():
        for sub, ext in (("definitions", "json"), ("workloads", "jsonl")):
            (root / sub / op).mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / "tests/data/fib" / sub / op / f"{name}.{ext}",
                        root / sub / op / f"{name}.{ext}")
        (root / "solutions" / op / name).mkdir(parents=True, exist_ok=True)
        for sol in sorted((REPO / "kernels/gpu/solutions" / name).glob("*.json")):
            shutil.copy(sol, root / "solutions" / op / name / sol.name)
    return root


def _copy(src: Path, into: Path, name: str) -> Path:
    dst = into / name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("traces"))
    return dst


def _count_traces(ds: Path) -> int:
    return sum(1 for p in (ds / "traces").rglob("*.jsonl") for line in p.open() if line.strip())


def _fib(ds: Path, solutions: list[str], isolated: bool, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, "-c", "from flashinfer_bench.cli.main import cli; cli()", "run",
           "--local", str(ds)]
    if solutions:
        cmd += ["--solutions", *solutions]
    if isolated:
        cmd.append("--use-isolated-runner")
    t0 = time.monotonic()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, tail = res.returncode, (res.stderr or res.stdout)[-300:]
    except subprocess.TimeoutExpired:
        rc, tail = 124, f"cut off after {timeout:.0f} s"
    return {"wall_s": time.monotonic() - t0, "traces": _count_traces(ds), "rc": rc,
            "tail": tail}


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sandboxharness.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def _stage_times(events: Path) -> dict[str, dict[str, Any]]:
    """Per solution: each stage's duration, for the sanitizer each tool's wall time, and
    where the host's time went (``host_s``: worker start-up, calls, judging, each role's
    timed calls, the sampled re-checks)."""
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"stages": {}, "tools": {},
                                                          "host": {}})
    if not events.exists():
        return out
    for line in events.read_text().splitlines():
        e = json.loads(line)
        if e.get("event") == "stage.end":
            row = out[e["solution"]]
            row["stages"][e["stage"]] = round(float(e["duration_s"]), 2)
            row["tools"].update({k: v for k, v in (e.get("tool_wall_s") or {}).items() if v})
            row["host"].update(e.get("host_s") or {})
    return out


def _ours(ds: Path, solutions: list[str], jobs: int, policy: str | None, work: Path,
          timeout: float) -> dict[str, Any]:
    keys = work / f"keys-{jobs}"
    _cli("keys", "generate", "--out", str(keys), "--name", "bench").check_returncode()
    log, events = work / f"audit-{jobs}.jsonl", work / f"events-{jobs}.jsonl"
    cmd = [sys.executable, "-m", "sandboxharness.cli", "run", "--local", str(ds), "--jobs",
           str(jobs), "--seed", "1", "--json", "--audit-log", str(log), "--signing-key",
           str(keys / "bench.key"), "--log-file", str(events), "--log-level", "info"]
    if solutions:
        cmd += ["--solutions", ",".join(solutions)]
    if policy:
        cmd += ["--policy", policy]
    t0 = time.monotonic()
    try:  # progress lines go straight to our stderr, so a cut-off run says how far it got
        res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=timeout)
        rc, summary = res.returncode, (json.loads(res.stdout) if res.stdout.strip() else {})
    except subprocess.TimeoutExpired:
        rc, summary = 124, {}
    wall = time.monotonic() - t0
    verify = _cli("audit", "verify", str(log), "--public-key", str(keys / "bench.pub"))
    stages = _stage_times(events)
    rows = []
    candidates = summary.get("candidates") or _ends(events)  # a cut-off run: from its events
    for c in candidates:
        st = stages.get(c["solution"], {"stages": {}, "tools": {}, "host": {}})
        s = st["stages"]
        floor = (s.get("compile", 0.0) + max(st["tools"].values(), default=0.0)
                 + s.get("benchmark", 0.0))
        rows.append({"solution": c["solution"], "decision": c["decision"] or "error",
                     "reasons": c["reasons"], "error": c["error"], "wall_s": c["wall_s"],
                     "stages": s, "tools": st["tools"], "host": st["host"], "floor_s": floor,
                     "traces": c["traces"]})
    return {"wall_s": wall, "traces": _count_traces(ds), "rows": rows, "rc": rc,
            "audit": (verify.returncode, (verify.stdout + verify.stderr).strip()[-300:]),
            "fib_read": _fib_read(ds)}


def _ends(events: Path) -> list[dict[str, Any]]:
    """What a cut-off run's event log says of the candidates that finished (and of those that
    had not, the stages they got through)."""
    if not events.exists():
        return []
    seen: dict[str, dict[str, Any]] = {}
    for line in events.read_text().splitlines():
        e = json.loads(line)
        name = e.get("solution", "")
        if e.get("event") == "candidate.start":
            seen[name] = {"solution": name, "decision": None, "reasons": [],
                          "error": "not finished when the run was cut off", "wall_s": 0.0,
                          "traces": 0}
        elif e.get("event") in ("candidate.end", "candidate.error"):
            seen[name] = {"solution": name, "decision": e.get("decision"),
                          "reasons": e.get("reasons", []), "error": e.get("error"),
                          "wall_s": e.get("wall_s", 0.0), "traces": e.get("traces", 0)}
    return list(seen.values())


def _fib_read(ds: Path) -> str:
    """FlashInfer-Bench's own loader on our traces: how many per definition, by status."""
    try:
        from flashinfer_bench.data import TraceSet
    except ImportError as exc:
        return f"flashinfer_bench not importable: {exc}"
    try:
        ts = TraceSet.from_path(str(ds))
    except Exception as exc:  # noqa: BLE001  reported, not raised: it is the finding
        return f"TraceSet.from_path failed: {type(exc).__name__}: {exc}"[:300]
    parts = []
    for name, traces in sorted(ts.traces.items()):
        st = Counter(t.evaluation.status.value for t in traces if t.evaluation)
        parts.append(f"{name}: {len(traces)} ({', '.join(f'{k} {v}' for k, v in sorted(st.items()))})")
    return "; ".join(parts) or "no traces"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", type=Path)
    ap.add_argument("--fib-set", action="store_true", help="the issue-17 FIB trace set")
    ap.add_argument("--solutions", default="")
    ap.add_argument("--jobs", default="4")
    ap.add_argument("--policy", default=None)
    ap.add_argument("--fib", action="store_true", help="also FlashInfer-Bench's persistent runner")
    ap.add_argument("--fib-isolated", action="store_true", help="and its isolated runner (last)")
    ap.add_argument("--budget-s", type=float, default=1800, help="for all configurations")
    ap.add_argument("--keep", type=Path, help="copy each configuration's dataset here")
    args = ap.parse_args()
    deadline = time.monotonic() + args.budget_s
    sols = [s for s in args.solutions.split(",") if s]
    env = describe()
    print(f"# dataset throughput, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n")
    print(f"- machine: {platform.node()}, {env['platform']}, device {env['device']}")
    print(f"- torch {env['torch']}, triton {env['triton']}, harness {env['harness_version']}, "
          f"policy {args.policy or 'default.yaml'}")
    results: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="shx-throughput-") as tmp:
        base = Path(tmp)
        dataset = build_fib_set(base) if args.fib_set else args.dataset
        if dataset is None:
            ap.error("--dataset or --fib-set")
        n_sol = len(list((dataset / "solutions").rglob("*.json")))
        n_wl = sum(1 for p in (dataset / "workloads").rglob("*.jsonl") for _ in p.open())
        print(f"- dataset {'FIB set (issue 17)' if args.fib_set else dataset}: {n_sol} "
              f"solutions, {n_wl} workloads; solutions {sols or 'all'}\n", flush=True)

        def left() -> float:
            return max(10.0, deadline - time.monotonic())

        if args.fib:
            r = _fib(_copy(dataset, base, "fib-persistent"), sols, False, left())
            results.append(("FIB persistent", r))
            print(f"  FIB persistent: {r['wall_s']:.1f} s", file=sys.stderr, flush=True)
        for jobs in [int(j) for j in args.jobs.split(",")]:
            ds = _copy(dataset, base, f"ours-{jobs}")
            results.append((f"ours, --jobs {jobs}", _ours(ds, sols, jobs, args.policy, base,
                                                         left())))
            print(f"  ours --jobs {jobs}: {results[-1][1]['wall_s']:.1f} s", file=sys.stderr,
                  flush=True)
        if args.fib_isolated:
            r = _fib(_copy(dataset, base, "fib-isolated"), sols, True, left())
            results.append(("FIB isolated", r))
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for f in base.glob("*.jsonl"):  # our event and audit logs
                shutil.copy(f, args.keep / f.name)
            for d in base.iterdir():
                if d.is_dir() and (d / "traces").exists():
                    shutil.copytree(d / "traces", args.keep / d.name / "traces",
                                    dirs_exist_ok=True)
        _report(results)


def _report(results: list[tuple[str, dict[str, Any]]]) -> None:
    ref = next((r["wall_s"] for n, r in results if n == "FIB persistent" and r["rc"] == 0),
               None)
    print("| configuration | wall s | exit | traces | traces/s | vs FIB persistent |")
    print("|---|---|---|---|---|---|")
    for name, r in results:
        rate = r["traces"] / r["wall_s"] if r["wall_s"] else 0.0
        ratio = f"{r['wall_s'] / ref:.2f}x" if ref else "-"
        print(f"| {name} | {r['wall_s']:.1f} | {r['rc']} | {r['traces']} | {rate:.2f} | "
              f"{ratio} |")
    for name, r in results:
        if "rows" not in r:
            if r.get("rc"):
                print(f"\n{name} exited {r['rc']}: {r['tail']!r}")
            continue
        print(f"\n## {name}: per candidate\n")
        print(f"- audit verify: exit {r['audit'][0]}: {r['audit'][1]!r}")
        print(f"- FlashInfer-Bench TraceSet.from_path on our traces: {r['fib_read']}\n")
        print("| solution | decision | reasons | wall s | floor s | wall/floor | stages (s) | "
              "sanitizer tools (s) |")
        print("|---|---|---|---|---|---|---|---|")
        ratios = []
        for row in r["rows"]:
            ratio = row["wall_s"] / row["floor_s"] if row["floor_s"] else 0.0
            if row["decision"] != "error":
                ratios.append(ratio)
            why = row["error"][:100] if row["error"] else ",".join(row["reasons"])
            print(f"| {row['solution']} | {row['decision']} | {why} | {row['wall_s']:.1f} | "
                  f"{row['floor_s']:.1f} | {ratio:.2f} | {row['stages']} | {row['tools']} |")
        if ratios:
            print(f"\nmedian wall/floor {statistics.median(ratios):.2f}")
        print("\nWhere each candidate's time went on the host (s; `host_s` of its verdict):\n")
        for row in r["rows"]:
            if row["host"]:
                parts = ", ".join(f"{k} {v:.1f}" for k, v in row["host"].items())
                print(f"- {row['solution']}: {parts}")


if __name__ == "__main__":
    main()
