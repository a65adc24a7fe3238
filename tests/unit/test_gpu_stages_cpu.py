"""GPU-stage logic that needs no GPU: report parsing, the sanitizer plumbing through the real
process sandbox (with a stand-in compute-sanitizer), roofline formulas, the regime gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandboxharness.intake import load_definition, load_workloads
from sandboxharness.models import Solution
from sandboxharness.sandbox import select_backend
from sandboxharness.stages import sanitizer
from sandboxharness.stages.benchmark import baselines, roofline
from sandboxharness.stages.cases import build_cases
from sandboxharness.stages.context import EvaluationContext
from sandboxharness.stages.execute import BenchResult, Plan, RoleRun
from sandboxharness.stages.job import Execution
from tests.conftest import DATA, TRITON_RMS, fast_policy, make_solution

FAKE = Path(__file__).resolve().parents[1] / "gpu" / "data" / "fake-compute-sanitizer"

MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at axpy_oob_read(const float *, const float *, float *, int)+0x1b0 in k.cu:14
=========     by thread (231,0,0) in block (3,0,0)
=========     Address 0x7f12a0000fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f12a0000000 of size 4000 bytes
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" \
on CUDA API call to cudaStreamSynchronize.
========= ERROR SUMMARY: 2 errors
"""
RACE = """========= Error: Race reported between Write access at race_kernel(float*)+0x90 in k.cu:20
=========     and Read access at race_kernel(float*)+0xc0 in k.cu:24 [248 hazards]
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def test_memcheck_report_parses_into_grouped_findings() -> None:
    found, total = sanitizer.parse(MEMCHECK, "memcheck")
    assert total == 2
    access = found[0]
    assert access.kind == "Invalid __global__ read" and access.kernel == "axpy_oob_read"
    assert access.location == "k.cu:14" and access.detail["allocation_size"] == 4000
    assert found[1].severity == "api"  # API errors are recorded, not blocking by default


def test_racecheck_report_counts_hazards() -> None:
    found, _ = sanitizer.parse(RACE, "racecheck")
    assert found[0].kind == "Race reported (Write vs Read)" and found[0].count == 248


def test_garbage_report_gives_no_findings() -> None:
    assert sanitizer.parse("hello\n=========\nrandom text", "memcheck") == ([], None)


def test_sanitizer_stage_plumbing_through_the_process_sandbox(tmp_path: Path) -> None:
    """The worker re-executes itself under the (stand-in) sanitizer inside the sandbox, keeps
    its protocol channel on fds 3/4, and the report written to out/ is judged on the host."""
    policy = fast_policy(sanitizer={"tools": ["memcheck", "racecheck"], "timeout_s": 120})
    definition = load_definition(DATA / "tiny" / "rms_t.json")
    cases = build_cases(definition, load_workloads(DATA / "tiny" / "rms_t.jsonl"), policy)
    sol = Solution.model_validate(make_solution(TRITON_RMS))
    (tmp_path / "candidate" / "out").mkdir(parents=True)
    ctx = EvaluationContext(definition=definition, solution=sol, workloads=(), policy=policy,
                            sandbox=select_backend("auto", policy), seed=7, device="cpu",
                            root=tmp_path)
    plan = Plan(cases=cases, bench_cases=cases, trials=1, seed=7, device="cpu", policy=policy)
    run = Execution(cand=RoleRun(role="candidate"), ref=None, plan=plan, cases=cases,
                    data_dir=Path.cwd(), cand_dir=tmp_path / "candidate" / "out",
                    ref_dir=tmp_path / "reference" / "out")
    result = sanitizer.run_tools(ctx, run, executable=str(FAKE))
    assert result.status == "failed"
    assert [r.code.value for r in result.reasons] == ["SANITIZER_MEMCHECK"]
    tools = result.details["tools"]
    assert tools["memcheck"]["exit_code"] == sanitizer.ERROR_EXITCODE
    assert tools["memcheck"]["findings"][0]["kernel"] == "fake_kernel"
    assert tools["racecheck"]["exit_code"] == 0 and not tools["racecheck"]["findings"]


def test_roofline_counts_bytes_and_gemm_flops() -> None:
    definition = load_definition(Path("kernels/gpu/definitions/gemm_n4096_k4096.json"))
    payload = {"inputs": [{"shape": [2, 4096], "dtype": "float16"},
                          {"shape": [4096, 4096], "dtype": "float16"}],
               "outputs": [{"shape": [2, 4096], "dtype": "float16"}]}
    assert roofline.bytes_per_call(payload) == 2 * (2 * 4096 + 4096 * 4096 + 2 * 4096)
    flops, formula = roofline.flops_per_call(definition, {"M": 2}, payload)
    assert flops == 2 * 2 * 4096 * 4096 and formula == "2*M*N*K"
    pos = roofline.position(definition, {"M": 2}, payload, 0.1,
                            {"copy_bandwidth_Bps": 4e12, "bf16_matmul_flops": 8e14})
    assert pos["bound"] == "memory" and 0 < pos["pct_of_speed_of_light"] < 100


def _run(times: list[float]) -> RoleRun:
    case = build_cases(load_definition(DATA / "tiny" / "rms_t.json"),
                       load_workloads(DATA / "tiny" / "rms_t.jsonl"), fast_policy())[0]
    run = RoleRun(role="x")
    run.benches.append(BenchResult(case, seeds=list(range(len(times))), times_s=times))
    return run


@pytest.mark.parametrize(("cand", "passed"), [([1.0] * 8, True), ([1.0] * 4 + [3.0] * 4, False)])
def test_regime_gate_needs_every_repeat(cand: list[float], passed: bool) -> None:
    """A win in one repeat only (the first block fast, the second slow) is not a win."""
    policy = fast_policy(promotion={"min_speedup": 1.5, "min_repeats": 2})
    reasons, details = baselines.gate(policy, _run(cand), {"reference": _run([2.0] * 8)})
    assert details["regimes"][0]["passed"] is passed
    assert bool(reasons) is not passed
    json.dumps(details)


def test_gate_on_missing_baseline_is_not_a_pass() -> None:
    policy = fast_policy(promotion={"min_speedup": 1.0, "baseline": "flashinfer"})
    reasons, _ = baselines.gate(policy, _run([1.0] * 4), {"reference": _run([2.0] * 4)})
    assert [r.code.value for r in reasons] == ["STAGE_NOT_RUN"]
