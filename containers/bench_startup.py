"""Per-container cost of the Docker backend, runc vs runsc (gVisor): prints a table.

    .venv/bin/python containers/bench_startup.py [--n 5]

start+teardown: create + attach + start, the worker's hello (imports torch, loads a trivial
candidate), bye, wait, inspect, remove: what every sandboxed role pays once per evaluation.
evaluate: one whole Harness.evaluate of the honest Triton rmsnorm (candidate + reference
containers, interpreter mode) under a small policy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sandboxharness.models.policy import Limits  # noqa: E402
from sandboxharness.sandbox.docker import DockerSandbox  # noqa: E402
from sandboxharness.sandbox.interface import JobSpec  # noqa: E402
from sandboxharness.stages.session import WorkerSession  # noqa: E402


def one_job(sandbox: DockerSandbox) -> float:
    root = Path(tempfile.mkdtemp(prefix="shx-bench-"))
    dirs = {k: root / k for k in ("src", "data", "out", "tmp")}
    for d in dirs.values():
        d.mkdir()
    (dirs["src"] / "cand.py").write_text("def run(*a):\n    return None\n")
    job = JobSpec(role="candidate", src_dir=dirs["src"], data_dir=dirs["data"],
                  out_dir=dirs["out"], tmp_dir=dirs["tmp"], limits=Limits())
    t0 = time.perf_counter()
    session = WorkerSession(sandbox.start(job, deadline_s=120), 120)
    paths = session.paths
    session.request({"op": "hello", "role": "candidate", "entry_file": "cand.py",
                     "entry_func": "run", "dps": False, "preload_triton": False,
                     "src": paths.src, "data": paths.data, "device": "cpu"}, 120)
    session.close()
    return time.perf_counter() - t0


def one_evaluation(sandbox: DockerSandbox) -> float:
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import DATA, TRITON_RMS, fast_policy, make_solution

    from sandboxharness.intake import load_definition, load_workloads
    from sandboxharness.models import Solution
    from sandboxharness.pipeline import Harness

    sol = Solution.model_validate(make_solution(TRITON_RMS))
    t0 = time.perf_counter()
    verdict = Harness(fast_policy(), sandbox=sandbox).evaluate(
        load_definition(DATA / "tiny" / "rms_t.json"), sol,
        load_workloads(DATA / "tiny" / "rms_t.jsonl"), seed=1)
    if verdict.decision != "promote":
        raise SystemExit(f"the honest candidate was rejected: {verdict.reasons}")
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for runtime in ("runc", "runsc"):
        ok, why = DockerSandbox.available(runtime=runtime)
        if not ok:
            rows.append((runtime, why, "", ""))
            continue
        sandbox = DockerSandbox(runtime=runtime)
        one_job(sandbox)  # warm the page cache
        jobs = [one_job(sandbox) for _ in range(args.n)]
        evals = [one_evaluation(sandbox) for _ in range(max(1, args.n // 2))]
        rows.append((runtime, f"{statistics.median(jobs):.2f}",
                     f"{min(jobs):.2f}-{max(jobs):.2f}", f"{statistics.median(evals):.2f}"))
        sandbox.close()
    print(f"{'runtime':8} {'start+teardown s (median)':>26} {'range':>12} {'evaluate s':>11}")
    for runtime, med, rng, ev in rows:
        print(f"{runtime:8} {med:>26} {rng:>12} {ev:>11}")


if __name__ == "__main__":
    main()
