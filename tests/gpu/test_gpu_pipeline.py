"""The GPU stages on real hardware (skipped without CUDA; run on the device machine).

Each test names the behaviour it guards; the full evidence (all planted bugs, all tricks,
timing against do_bench) is benchmarks/gpu_validate.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxharness.intake import load_definition, load_solution, load_workloads
from sandboxharness.models import Policy, Verdict
from sandboxharness.pipeline import Harness

pytestmark = pytest.mark.gpu
G = Path(__file__).resolve().parents[2] / "kernels" / "gpu"


def _policy(**over: object) -> Policy:
    base: dict = {
        "name": "test-gpu", "languages": ["triton", "python", "cuda"],
        "static": {"bandit": False, "semgrep": False, "ast_rules": False},
        "imports": {"deny": []},
        "limits": {"compile_timeout_s": 300, "run_timeout_s": 300, "memory_mb": 32768},
        "correctness": {"trials": 1, "max_workloads": 1, "heldout_values": []},
        "benchmark": {"warmup": 2, "iterations": 10, "sampled_checks": 2, "baselines": []},
        "sanitizer": {"tools": ["memcheck"]},
    }
    for k, v in over.items():
        base[k] = {**base[k], **v} if isinstance(v, dict) else v
    return Policy.model_validate(base)


def _eval(definition: str, stem: str, policy: Policy) -> Verdict:
    return Harness(policy).evaluate(
        load_definition(G / "definitions" / f"{definition}.json"),
        load_solution(G / "solutions" / definition / f"{stem}.json"),
        load_workloads(G / "workloads" / f"{definition}.jsonl"), seed=11)


def test_oob_read_in_cuda_kernel_is_rejected_by_memcheck() -> None:
    """Planted bug: a one-element overrun, invisible to correctness (outputs are right)."""
    v = _eval("axpy_f32", "bug_oob_read", _policy())
    assert v.stage("correctness").status == "passed"
    assert {r.code.value for r in v.reasons} == {"SANITIZER_MEMCHECK"}
    finding = v.stage("sanitizer").details["tools"]["memcheck"]["findings"][0]
    assert finding["kind"] == "Invalid __global__ read" and "axpy_oob_read" in finding["kernel"]


def test_honest_tvm_ffi_kernel_passes_every_tool_and_is_timed_with_events() -> None:
    v = _eval("axpy_f32", "cuda_tvmffi_honest",
              _policy(sanitizer={"tools": ["memcheck", "racecheck", "initcheck", "synccheck"]}))
    assert v.decision == "promote", v.reasons
    comp = v.stage("compile").details
    assert comp["native"] and comp["errors"] == 0
    bench = v.stage("benchmark").details
    assert bench["clock"].startswith("cuda-events") and bench["regimes"][0]["roofline"]["bytes"] > 0


def test_side_stream_work_is_counted() -> None:
    """Trick: launch on a side stream and return; the device-wide sync counts the work."""
    pol = _policy(correctness={"max_workloads": 3}, sanitizer={"tools": []})
    honest = _eval("rmsnorm_h4096", "triton_honest", pol)
    trick = _eval("rmsnorm_h4096", "trick_side_stream", pol)
    assert honest.decision == trick.decision == "promote"
    big = lambda v: max(v.stage("benchmark").details["workloads"],  # noqa: E731
                        key=lambda w: w["axes"]["batch_size"])["candidate"]["median_ms"]
    assert big(trick) >= 0.9 * big(honest)


def test_cuda_solution_running_aten_ops_is_language_not_used() -> None:
    """Trick: a `cuda` solution ships its own kernel but its entry point does the work with
    ATen ops (torch's kernels). CUPTI names every timed call's kernels; none is its own."""
    import json

    from sandboxharness.models import Solution

    doc = json.loads((G / "solutions" / "axpy_f32" / "cuda_torch_honest.json").read_text())
    for src in doc["sources"]:
        if src["path"] == "binding.cpp":
            src["content"] = src["content"].replace(
                "axpy_launch(x.data_ptr<float>(), y.data_ptr<float>(), z.data_ptr<float>(),\n"
                "              static_cast<int>(x.numel()), "
                "c10::cuda::getCurrentCUDAStream().stream());",
                "z.copy_(x * 2 + y);")
            assert "z.copy_" in src["content"]
    sol = Solution.model_validate({**doc, "name": "axpy_aten_trick"})
    pol = _policy(sanitizer={"tools": []})
    v = Harness(pol).evaluate(load_definition(G / "definitions" / "axpy_f32.json"), sol,
                              load_workloads(G / "workloads" / "axpy_f32.jsonl"), seed=11)
    if "CUPTI" not in str(v.stage("benchmark").details.get("clock")):
        pytest.skip("CUPTI unavailable here: kernel names are not recorded")
    assert {r.code.value for r in v.reasons} == {"LANGUAGE_NOT_USED"}, v.reasons


def test_honest_kernels_are_plausible_and_bound() -> None:
    """An honest Triton kernel near bandwidth is plausible, and every timed call was bound."""
    pol = _policy(correctness={"max_workloads": 3}, sanitizer={"tools": []})
    v = _eval("rmsnorm_h4096", "triton_honest", pol)
    assert v.decision == "promote", v.reasons
    for regime in v.stage("benchmark").details["regimes"]:
        assert regime["roofline"]["plausible"] is True
