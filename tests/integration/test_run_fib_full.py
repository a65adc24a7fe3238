"""``run --local`` on FlashInfer-Bench's real rmsnorm_h4096 with its FULL workload set (14
workloads, batches up to 14,509 x 4096 bf16), on the CPU: locally, and on a real local Ray
cluster with the same decisions and trace statuses (issue 17's CPU proof).

Every workload is evaluated (no sampling); a light policy keeps trials and timed calls few,
so the suite stays short, but the sizes are FIB's: the streamed comparison must hold one call's
results at a time and a session must never be cut short for the set's size."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import DATA, REPO, make_solution

pytestmark = pytest.mark.slow

HONEST = """import torch

def run(hidden_states, weight):
    x = hidden_states.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return y.to(hidden_states.dtype)
"""
NO_WEIGHT = """import torch

def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)).to(hidden_states.dtype)
"""
POLICY = ("name: fib-full-cpu\n"
          "static: {bandit: true, semgrep: true, ast_rules: true}\n"
          "correctness: {trials: 1, heldout_values: [3], heldout_count: 0}\n"
          "benchmark: {warmup: 0, iterations: 2, sampled_checks: 1}\n")
WORKLOADS = DATA / "fib" / "workloads" / "rmsnorm" / "rmsnorm_h4096.jsonl"


def _dataset(root: Path) -> Path:
    for sub in ("definitions/rmsnorm", "workloads/rmsnorm", "solutions/rmsnorm_h4096"):
        (root / sub).mkdir(parents=True)
    shutil.copy(DATA / "fib" / "definitions" / "rmsnorm" / "rmsnorm_h4096.json",
                root / "definitions" / "rmsnorm")
    shutil.copy(WORKLOADS, root / "workloads" / "rmsnorm")
    for name, code in (("honest", HONEST), ("no_weight", NO_WEIGHT)):
        doc = make_solution(code, name=name, dps=False, language="python")
        doc["definition"] = "rmsnorm_h4096"
        (root / "solutions" / "rmsnorm_h4096" / f"{name}.json").write_text(json.dumps(doc))
    return root


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sandboxharness.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=1500, env=env)


def _statuses(root: Path) -> dict[tuple[str, str], str]:
    seen: dict[tuple[str, str], str] = {}
    for line in (root / "traces" / "rmsnorm" / "rmsnorm_h4096.jsonl").read_text().splitlines():
        t = json.loads(line)
        key = (t["solution"], t["workload"]["uuid"])
        assert key not in seen, f"trace written twice: {key}"
        seen[key] = t["evaluation"]["status"]
    return seen


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, dict]]:
    base = tmp_path_factory.mktemp("fib-full")
    policy = base / "policy.yaml"
    policy.write_text(POLICY)
    ds = _dataset(base / "local")
    pristine = base / "pristine"
    shutil.copytree(ds, pristine)
    res = _cli("run", "--local", str(ds), "--policy", str(policy), "--backend", "process",
               "--seed", "5", "--json", "--no-archive")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    yield ds, pristine, json.loads(res.stdout)


def test_the_full_workload_set_runs_locally(local_run: tuple[Path, Path, dict]) -> None:
    ds, _, summary = local_run
    n = len(WORKLOADS.read_text().splitlines())
    assert n == 14
    got = {c["solution"]: c for c in summary["candidates"]}
    assert got["honest"]["decision"] == "promote", got["honest"]
    assert got["no_weight"]["decision"] == "reject"
    assert "INCORRECT_NUMERICAL" in got["no_weight"]["reasons"]
    statuses = _statuses(ds)
    assert len(statuses) == 2 * n  # every workload of the file, for both solutions
    assert {s for (sol, _), s in statuses.items() if sol == "honest"} == {"PASSED"}
    fib = pytest.importorskip("flashinfer_bench.data")
    ts = fib.TraceSet.from_path(str(ds))
    assert len(ts.traces["rmsnorm_h4096"]) == 2 * n


def test_the_full_workload_set_on_a_ray_cluster_matches(local_run: tuple[Path, Path, dict],
                                                       tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from tests.integration.test_run_ray import _cluster

    local, pristine, summary = local_run
    on_ray = tmp_path / "ray"
    shutil.copytree(pristine, on_ray)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    with _cluster() as (address, _temp, env):
        res = _cli("run", "--local", str(on_ray), "--ray", address, "--policy", str(policy),
                   "--backend", "process", "--seed", "5", "--json", "--no-archive", env=env)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]

    def decisions(s: dict) -> dict[str, tuple[str, list[str], int]]:
        return {c["solution"]: (c["decision"], c["reasons"], c["traces"])
                for c in s["candidates"]}

    assert decisions(json.loads(res.stdout)) == decisions(summary)
    assert _statuses(on_ray) == _statuses(local)
