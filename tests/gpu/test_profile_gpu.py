"""The profile stage on real hardware (skipped without CUDA; run on the device machine, ncu on
PATH or under CUDA_HOME): the worker under ncu inside the sandbox, one signature per regime."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxharness.intake import load_definition, load_solution, load_workloads
from sandboxharness.models import Policy, Solution, Verdict
from sandboxharness.pipeline import Harness
from sandboxharness.profile.evidence import regime_signatures
from sandboxharness.stages.profile import find_ncu

pytestmark = pytest.mark.gpu
G = Path(__file__).resolve().parents[2] / "kernels" / "gpu"


def _policy(**profile: object) -> Policy:
    return Policy.model_validate({
        "name": "test-gpu-profile", "languages": ["triton", "python"],
        "static": {"bandit": False, "semgrep": False, "ast_rules": False},
        "imports": {"deny": []},
        "limits": {"compile_timeout_s": 300, "run_timeout_s": 300, "memory_mb": 32768},
        "correctness": {"trials": 1, "heldout_values": []},
        "benchmark": {"warmup": 1, "iterations": 5, "sampled_checks": 1, "baselines": []},
        "sanitizer": {"tools": []},
        "profile": {"enabled": True, "timeout_s": 240, **profile},
    })


def _eval(definition: str, solution: Solution, policy: Policy) -> Verdict:
    if find_ncu() is None:
        pytest.skip("ncu not found (CUDA_HOME/bin, PATH)")
    return Harness(policy).evaluate(
        load_definition(G / "definitions" / f"{definition}.json"), solution,
        load_workloads(G / "workloads" / f"{definition}.jsonl"), seed=11)


def test_rmsnorm_regimes_get_a_signature_each_and_the_large_one_is_memory_bound() -> None:
    """batch 1, 170, 8804 rows of 4096 bf16: the largest streams ~144 MB (memory-bound); the
    single row is a few microseconds (launch-bound). Only the candidate's kernel is measured:
    input generation and the warm-up call run outside the profiled range."""
    sol = load_solution(G / "solutions" / "rmsnorm_h4096" / "triton_honest.json")
    v = _eval("rmsnorm_h4096", sol, _policy())
    prof = v.stage("profile")
    assert prof.status == "passed", prof.details
    sigs = regime_signatures(prof.details)
    assert list(sigs) == ["batch_size=1", "batch_size=170", "batch_size=8804"]
    for name, s in sigs.items():
        assert s is not None, name
        assert s.kernel.startswith("_rms") and s.kernel_count == 1, s
    big, one = sigs["batch_size=8804"], sigs["batch_size=1"]
    assert big is not None and one is not None
    assert big.bottleneck == "memory" and big.mem_throughput_pct is not None
    assert big.dram_bytes is not None and big.dram_bytes > 100e6
    assert one.bottleneck == "launch" and one.grid_size == 1
    assert prof.duration_s < 240
    assert v.stage("benchmark").status == "passed"  # profiling after timing changes nothing


GEMM = Solution.model_validate({
    "name": "gemm_torch_matmul", "definition": "gemm_n4096_k4096", "author": "tests",
    "spec": {"language": "python", "target_hardware": ["H200"], "entry_point": "g.py::run",
             "dependencies": [], "destination_passing_style": False},
    "sources": [{"path": "g.py", "content":
                 "import torch\n\n\ndef run(A, B):\n    return torch.matmul(A, B.T)\n"}]})


def test_large_fp16_matmul_is_compute_bound() -> None:
    v = _eval("gemm_n4096_k4096", GEMM, _policy(max_regimes=1))
    prof = v.stage("profile")
    assert prof.status == "passed", prof.details
    (sig,) = regime_signatures(prof.details).values()
    assert sig is not None and sig.bottleneck == "compute", sig
    assert prof.details["signatures"][0]["axes"] == {"M": 2053}  # one regime: the largest
