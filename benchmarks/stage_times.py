"""Per-stage wall time of evaluating the example solutions (a benchmark: prints a table).

    .venv/bin/python benchmarks/stage_times.py [--backend process] [--repeat 1]

Stage times come from the verdicts themselves (each stage records its duration); "total" is the
wall time of the whole evaluate call, including process start-up and the reference run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

from sandboxharness._internal.host import describe  # noqa: E402
from sandboxharness.api import evaluate_files  # noqa: E402

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
STAGES = ["policy", "static", "compile", "correctness", "sanitizer", "benchmark"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default=None)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default=None, help="substring filter on solution paths")
    args = ap.parse_args()
    manifest = json.loads((KERNELS / "examples.json").read_text())
    env = describe()
    print(f"# per-stage time, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{os.cpu_count()} cores, device {env['device']}, python {env['python']}, "
          f"torch {env['torch']}, triton {env['triton']}, backend {args.backend or 'auto'}")
    print("| solution | decision | " + " | ".join(STAGES) + " | total (s) |")
    print("|---|---|" + "---|" * (len(STAGES) + 1))
    for item in manifest["examples"]:
        if args.only and args.only not in item["solution"]:
            continue
        for _ in range(args.repeat):
            t0 = time.monotonic()
            v = evaluate_files(KERNELS / item["definition"], KERNELS / item["solution"],
                               KERNELS / item["workloads"], backend=args.backend, seed=1)
            total = time.monotonic() - t0
            per = {s.stage.value: s for s in v.stages}
            cells = [f"{per[s].duration_s:.2f}" if s in per and per[s].status != "skipped"
                     else "-" for s in STAGES]
            print(f"| {item['solution']} | {v.decision} | " + " | ".join(cells)
                  + f" | {total:.2f} |")


if __name__ == "__main__":
    main()
