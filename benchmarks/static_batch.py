"""Static analysis one by one vs batched: seconds per candidate for a batch of candidates from
kernels/ (red-team cases and example solutions, default policy, real bandit and semgrep).
Prints a Markdown report (machine, versions, date, table).

    .venv/bin/python benchmarks/static_batch.py [--size 32] [--rounds 1]

* one by one: ``run_static`` for each candidate in turn (each pays bandit's and semgrep's
  start-up);
* batched: one ``run_static_batch`` over all of them (one process per tool).

Both runs are checked to give the same findings, blocking findings and violations.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from sandboxharness.api import default_policy
from sandboxharness.intake import load_definition, load_solution
from sandboxharness.models import Definition, Solution
from sandboxharness.static import (
    BanditAnalyzer,
    SemgrepAnalyzer,
    StaticReport,
    run_static,
    run_static_batch,
)

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
Item = tuple[Solution, Definition | None]


def _candidates() -> list[Item]:
    """Red-team cases, then example solutions, in a fixed order."""
    out: list[Item] = []
    redteam = KERNELS / "redteam"
    for case in json.loads((redteam / "manifest.json").read_text())["cases"]:
        out.append((load_solution(redteam / case["solution"]),
                    load_definition(redteam / case["definition_file"])))
    for path in sorted((KERNELS / "solutions").glob("*/*.json")):
        sol = load_solution(path)
        out.append((sol, load_definition(KERNELS / "definitions" / f"{sol.definition}.json")))
    return out


def _same(a: Sequence[StaticReport], b: Sequence[StaticReport]) -> bool:
    return all((x.findings, x.blocking, x.violations, x.tools)
               == (y.findings, y.blocking, y.violations, y.tools) for x, y in zip(a, b, strict=True))


def _machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    return (f"{cpu}, {os.cpu_count()} CPUs, Linux {platform.release()}, load average "
            f"{os.getloadavg()[0]:.1f} at start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=32, help="candidates in the batch")
    ap.add_argument("--rounds", type=int, default=1, help="repeat both measurements")
    args = ap.parse_args()
    pool = _candidates()
    items = [pool[i % len(pool)] for i in range(args.size)]
    policy = default_policy()
    print(f"# static analysis, one by one vs batched, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print()
    print(f"- machine: {platform.node()}, {_machine()}")
    print(f"- Python {platform.python_version()}, {BanditAnalyzer().version()}, semgrep "
          f"{SemgrepAnalyzer().version()}, policy default.yaml")
    print(f"- batch: {args.size} candidates ({min(args.size, len(pool))} distinct, from "
          f"kernels/redteam and kernels/solutions), "
          f"{sum(len(s.sources) for s, _ in items)} source files")
    print()
    print("| round | one by one: s total | s / candidate | batched: s total | s / candidate "
          "| speed-up | same reports |")
    print("|---|---|---|---|---|---|---|")
    for r in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="shx-static-bench-") as tmp:
            t0 = time.perf_counter()
            alone = [run_static(s, d, policy, Path(tmp) / "alone") for s, d in items]
            t1 = time.perf_counter()
            batched = run_static_batch(items, policy, Path(tmp) / "batch")
            t2 = time.perf_counter()
        one, many = t1 - t0, t2 - t1
        print(f"| {r} | {one:.2f} | {one / len(items):.3f} | {many:.2f} | "
              f"{many / len(items):.3f} | {one / many:.1f}x | {_same(alone, batched)} |")
        spent = {k: v for k, v in batched[0].durations.items() if k != "policy"}
        print(f"\nround {r}, batched, analyser seconds per candidate: "
              + ", ".join(f"{k} {v:.3f}" for k, v in spent.items()) + "\n")


if __name__ == "__main__":
    main()
