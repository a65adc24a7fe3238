"""The promotion gates and the decision, on plain timings (no stage code, no GPU).

The benchmark stage asks ``CpuSpeedGate`` (CPU) and ``RegimeGate`` (GPU); the promotion
stage is ``decide``. Messages, codes and details are the verdict's, so they are spelled out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from sandboxharness.models import Policy, Reason, ReasonCode, Stage, StageResult
from sandboxharness.policy import CpuSpeedGate, RegimeGate, RequiredStages, blocks, decide


def policy(**kw: Any) -> Policy:
    return Policy.model_validate({"name": "t", **kw})


@dataclass(frozen=True)
class Case:
    id: str
    workload: str = "w"
    axes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Bench:
    case: Case
    times_s: list[float]


@dataclass
class Run:
    benches: list[Bench] = field(default_factory=list)


def run(*per_case: list[float]) -> Run:
    return Run([Bench(Case(f"c{i}", axes={"n": i}), t) for i, t in enumerate(per_case)])


# --- RegimeGate ---------------------------------------------------------------------------

@pytest.mark.parametrize(("cand", "passed"), [([1.0] * 8, True), ([1.0] * 4 + [3.0] * 4, False)])
def test_regime_gate_needs_every_repeat(cand: list[float], passed: bool) -> None:
    """A win in one repeat only (the first block fast, the second slow) is not a win."""
    gate = RegimeGate(policy(promotion={"min_speedup": 1.5, "min_repeats": 2}).promotion)
    reasons, details = gate.check(run(cand), {"reference": run([2.0] * 8)})
    assert details["regimes"][0]["passed"] is passed
    assert bool(reasons) is not passed
    json.dumps(details)


def test_regime_gate_details_and_message() -> None:
    gate = RegimeGate(policy(promotion={"min_speedup": 1.5, "min_repeats": 2}).promotion)
    reasons, details = gate.check(run([1.0] * 4, [1.0, 1.0, 3.0, 3.0]),
                                  {"reference": run([2.0] * 4, [2.0] * 4),
                                   "flashinfer": run([4.0] * 4)})
    assert details["baselines"] == ["flashinfer", "reference"]
    assert details["gate_baseline"] == "reference" and details["archive_only"] is True
    first, second = details["regimes"]
    assert first == {"workload": "w", "axes": {"n": 0}, "speedup_vs_reference": 2.0,
                     "reference_median_ms": 2000.0, "speedup_vs_flashinfer": 4.0,
                     "flashinfer_median_ms": 4000.0, "repeats_speedup": [2.0, 2.0],
                     "passed": True}
    assert "speedup_vs_flashinfer" not in second  # no flashinfer timing for that case
    assert [(r.code, r.stage) for r in reasons] == [
        (ReasonCode.SLOWER_THAN_BASELINE, Stage.BENCHMARK)]
    assert reasons[0].message == ("1/2 regimes beat reference x1.5 in all 2 repeats; worst "
                                  "{'n': 1}: [2.0, 0.667] (a regime win: archived only, "
                                  "not promoted)")


def test_regime_gate_on_missing_baseline_is_not_a_pass() -> None:
    gate = RegimeGate(policy(promotion={"min_speedup": 1.0, "baseline": "flashinfer"}).promotion)
    reasons, details = gate.check(run([1.0] * 4), {"reference": run([2.0] * 4)})
    assert [r.code for r in reasons] == [ReasonCode.STAGE_NOT_RUN]
    assert reasons[0].message == ("the policy gates on the flashinfer baseline, which could "
                                  "not be timed here")
    assert "archive_only" not in details


def test_regime_gate_without_min_speedup_only_reports() -> None:
    reasons, details = RegimeGate(policy().promotion).check(run([1.0] * 4),
                                                            {"reference": run([2.0] * 4)})
    assert reasons == [] and "archive_only" not in details
    assert details["regimes"][0]["speedup_vs_reference"] == 2.0
    assert "passed" not in details["regimes"][0]


def test_regime_gate_with_no_repeats_to_judge() -> None:
    """Fewer timed calls than repeats: the regime cannot pass; no calls at all: not judged."""
    gate = RegimeGate(policy(promotion={"min_speedup": 1.0, "min_repeats": 3}).promotion)
    reasons, details = gate.check(run([1.0, 1.0]), {"reference": run([2.0, 2.0])})
    assert details["regimes"][0]["passed"] is False and len(reasons) == 1
    assert reasons[0].message == ("0/1 regimes beat reference x1.0 in all 3 repeats; worst "
                                  "{'n': 0}: [2.0, 2.0]")


def test_blocks_are_consecutive_medians() -> None:
    assert blocks([1.0, 2.0, 3.0, 4.0, 5.0], 2) == [1.5, 4.0]
    assert blocks([1.0, 2.0], 5) == [1.0, 2.0]
    assert all(math.isnan(x) for x in blocks([], 2))


# --- CpuSpeedGate -------------------------------------------------------------------------

@pytest.mark.parametrize(("promotion", "geo", "device", "slow"), [
    ({"min_speedup": 2.0, "gate_speed_on_cpu": True}, 1.5, "cpu", True),
    ({"min_speedup": 2.0, "gate_speed_on_cpu": True}, 2.0, "cpu", False),
    ({"min_speedup": 2.0, "gate_speed_on_cpu": True}, None, "cpu", False),
    ({"min_speedup": 2.0, "gate_speed_on_cpu": True}, float("nan"), "cpu", False),
    ({"min_speedup": 2.0, "gate_speed_on_cpu": True}, 1.5, "cuda", False),  # RegimeGate's
    ({"min_speedup": 2.0}, 1.5, "cpu", False),  # CPU wall clock never gates by default
    ({"gate_speed_on_cpu": True}, 0.1, "cpu", False),
])
def test_cpu_speed_gate(promotion: dict[str, Any], geo: float | None, device: str,
                        slow: bool) -> None:
    got = CpuSpeedGate(policy(promotion=promotion).promotion).check(geo, device)
    if not slow:
        assert got is None
    else:
        assert got == Reason(code=ReasonCode.SLOWER_THAN_BASELINE, stage=Stage.BENCHMARK,
                             message="speedup 1.500x under the required 2.0x")


# --- RequiredStages and decide ------------------------------------------------------------

def result(stage: Stage, status: str, why: str | None = None) -> StageResult:
    reasons = [Reason(code=ReasonCode.TIMEOUT, stage=stage, message="m")] \
        if status == "failed" else []
    return StageResult(stage=stage, status=status,  # type: ignore[arg-type]
                       duration_s=0.0, reasons=reasons, details={"reason": why} if why else {})


PASSED = [result(s, "passed") for s in (Stage.POLICY, Stage.STATIC, Stage.COMPILE,
                                        Stage.CORRECTNESS, Stage.BENCHMARK)]


def test_decide_passes_when_every_required_stage_passed() -> None:
    pol = policy()
    got = decide([*PASSED, result(Stage.SANITIZER, "skipped", "no CUDA device")], pol)
    assert (got.stage, got.status, got.reasons) == (Stage.PROMOTION, "passed", [])
    assert got.details == {"required": ["static", "compile", "correctness", "benchmark"]}


def test_decide_is_skipped_after_a_rejection() -> None:
    got = decide([*PASSED[:2], result(Stage.COMPILE, "failed")], policy())
    assert (got.status, got.duration_s, got.reasons) == ("skipped", 0.0, [])
    assert got.details == {"reason": "an earlier stage rejected the candidate"}


def test_a_required_stage_skipped_or_missing_rejects() -> None:
    pol = policy(required_stages=["static", "sanitizer", "benchmark"])
    got = decide([*PASSED[:4], result(Stage.SANITIZER, "skipped", "no CUDA device")], pol)
    assert got.status == "failed"
    assert [(r.code, r.stage, r.message) for r in got.reasons] == [
        (ReasonCode.STAGE_NOT_RUN, Stage.PROMOTION,
         "required stage 'sanitizer' did not pass: no CUDA device"),
        (ReasonCode.STAGE_NOT_RUN, Stage.PROMOTION,
         "required stage 'benchmark' did not pass: not run")]
    assert got.details == {"required": ["static", "sanitizer", "benchmark"]}
    assert RequiredStages(["compile"]).check([result(Stage.COMPILE, "skipped")])[0].message \
        == "required stage 'compile' did not pass: not run"
