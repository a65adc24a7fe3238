"""What binding every call costs on the GPU: one honest Triton rmsnorm over FlashInfer-Bench's
full rmsnorm_h4096 workload set (14 workloads, batch up to 14,509 x 4096 bf16), every stage
but the sanitizer. Prints per-stage seconds and, per workload, the kernel's median against the
host's wall time for the timed batch (the difference is input making, digests and frames).

    python3 benchmarks/binding_cost.py        # on a GPU machine
"""

from __future__ import annotations

import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

from sandboxharness._internal.host import describe
from sandboxharness.intake import load_definition, load_solution, load_workloads
from sandboxharness.models import Policy
from sandboxharness.pipeline import Harness

REPO = Path(__file__).resolve().parents[1]
FIB = REPO / "tests" / "data" / "fib"


def main() -> None:
    policy = Policy.model_validate({
        "name": "binding-cost", "languages": ["triton"],
        "static": {"bandit": False, "semgrep": False, "ast_rules": False},
        "imports": {"deny": []},
        "limits": {"compile_timeout_s": 300, "run_timeout_s": 600, "memory_mb": 65536},
        "correctness": {"trials": 1, "max_workloads": 14, "heldout_values": []},
        "benchmark": {"warmup": 2, "iterations": 10, "sampled_checks": 1, "baselines": []},
        "sanitizer": {"tools": []}})
    d = load_definition(FIB / "definitions" / "rmsnorm" / "rmsnorm_h4096.json")
    w = load_workloads(FIB / "workloads" / "rmsnorm" / "rmsnorm_h4096.jsonl")
    s = load_solution(REPO / "kernels" / "gpu" / "solutions" / "rmsnorm_h4096" /
                      "triton_honest.json")
    env = describe()
    t0 = time.monotonic()
    v = Harness(policy).evaluate(d, s, w, seed=3)
    wall = time.monotonic() - t0
    print(f"# binding cost, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{os.cpu_count()} cores, {env['device']}, torch {env['torch']}, "
          f"triton {env['triton']}")
    print(f"decision: {v.decision} {[r.code.value for r in v.reasons]}; wall {wall:.1f} s")
    print("| stage | status | seconds |\n|---|---|---|")
    for st in v.stages:
        print(f"| {st.stage.value} | {st.status} | {st.duration_s:.2f} |")
    bench = v.stage("benchmark").details.get("workloads", [])
    print("\n| batch | kernel median (ms) | 10 calls reported (ms) | host, timed batch (ms) |")
    print("|---|---|---|---|")
    for wl in bench:
        c = wl["candidate"]
        print(f"| {wl['axes'].get('batch_size')} | {c['median_ms']:.4f} | "
              f"{c['mean_ms'] * c['n']:.3f} | {wl['host_elapsed_ms']:.1f} |")


if __name__ == "__main__":
    main()
