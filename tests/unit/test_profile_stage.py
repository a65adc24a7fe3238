"""The profile stage without a GPU: the regime picks, the report reader's refusals, why it
skips, and the whole job through the real process sandbox with a stand-in ncu (the worker
re-execs under it, keeps its channel, and the report it writes is parsed on the host)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sandboxharness.intake import load_definition, load_workloads
from sandboxharness.models import Solution, Stage, StageResult
from sandboxharness.profile.evidence import regime_signatures
from sandboxharness.profile.ncu_parse import NcuParseError
from sandboxharness.sandbox import select_backend
from sandboxharness.stages import profile
from sandboxharness.stages.cases import Case, build_cases
from sandboxharness.stages.context import EvaluationContext, Needs, SoFar
from sandboxharness.stages.execute import Plan, RoleRun
from sandboxharness.stages.job import Execution
from tests.conftest import DATA, TRITON_RMS, fast_policy, make_solution

FAKE_NCU = Path(__file__).resolve().parents[1] / "gpu" / "data" / "fake-ncu"


def case(b: int, *, heldout: bool = False) -> Case:
    spec = [{"name": "x", "shape": [b, 128]}]
    return Case(id=f"c{b}", workload=f"w{b}", axes={"b": b}, heldout=heldout,
                payload={"inputs": spec, "outputs": spec})


def test_one_representative_per_regime_spread_by_size() -> None:
    cases = [case(b) for b in (64, 1, 8, 8, 4096, 512, 2)] + [case(3, heldout=True)]
    picks = profile.representatives(cases, 3)
    assert [c.axes["b"] for c in picks] == [1, 64, 4096]
    assert [c.axes["b"] for c in profile.representatives(cases, 10)] == [1, 2, 8, 64, 512, 4096]
    assert [c.axes["b"] for c in profile.representatives(cases, 1)] == [4096]
    assert profile.regime_of(case(8)) == "b=8"
    assert profile.regime_of(Case("c", "w", {}, False, {"inputs": [], "outputs": []})) == "all"


def test_report_reader_refuses_links_other_files_and_oversize(tmp_path: Path) -> None:
    real = tmp_path / "real.csv"
    real.write_text("x" * 10)
    assert profile.read_report(real, 10) == "x" * 10
    assert profile.read_report(tmp_path / "absent.csv", 10) is None
    with pytest.raises(NcuParseError, match="at most 9"):
        profile.read_report(real, 9)
    (tmp_path / "link.csv").symlink_to(real)
    assert profile.read_report(tmp_path / "link.csv", 100) is None  # O_NOFOLLOW: not followed
    os.mkfifo(tmp_path / "fifo.csv")
    with pytest.raises(NcuParseError, match="not a regular file"):
        profile.read_report(tmp_path / "fifo.csv", 100)


def _ctx(tmp_path: Path, device: str, **policy: Any) -> EvaluationContext:
    pol = fast_policy(**policy)
    definition = load_definition(DATA / "tiny" / "rms_t.json")
    return EvaluationContext(definition=definition, solution=Solution.model_validate(
        make_solution(TRITON_RMS)), workloads=(), policy=pol,
        sandbox=select_backend("auto", pol), seed=7, device=device, root=tmp_path)


def _failed(stage: Stage) -> StageResult:
    from sandboxharness.models import Reason, ReasonCode

    return StageResult(stage=stage, status="failed", duration_s=0.0, reasons=[
        Reason(code=ReasonCode.RUNTIME_ERROR, stage=stage, message="x")])


@pytest.mark.parametrize(("device", "earlier", "enabled", "why"), [
    ("cpu", None, True, "no CUDA device: Nsight Compute needs a GPU"),
    ("cpu", Stage.CORRECTNESS, True, "no CUDA device: Nsight Compute needs a GPU"),
    ("cpu", Stage.COMPILE, True, "not run: the candidate did not compile"),
    ("cuda", Stage.CORRECTNESS, True, "not run: the candidate is not correct"),
    ("cuda", Stage.SANITIZER, True, "not run: an earlier stage failed"),
    ("cuda", None, False, "the policy does not profile (profile.enabled is false)"),
])
def test_why_the_stage_skips(tmp_path: Path, device: str, earlier: Stage | None,
                             enabled: bool, why: str) -> None:
    so_far = SoFar()
    if earlier is not None:
        so_far.results.append(_failed(earlier))
    got = profile.ProfileStage().run(_ctx(tmp_path, device, profile={"enabled": enabled}),
                                     so_far)
    assert (got.stage, got.status, got.details) == (Stage.PROFILE, "skipped", {"reason": why})
    assert profile.ProfileStage.needs is Needs.EXCLUSIVE_GPU


def _execution(ctx: EvaluationContext, tmp_path: Path) -> Execution:
    cases = build_cases(ctx.definition, load_workloads(DATA / "tiny" / "rms_t.jsonl"),
                        ctx.policy)
    (tmp_path / "candidate" / "out").mkdir(parents=True)
    plan = Plan(cases=cases, bench_cases=cases, trials=1, seed=7, device="cpu",
                policy=ctx.policy)
    return Execution(cand=RoleRun(role="candidate"), ref=None, plan=plan, cases=cases,
                     data_dir=Path.cwd(), cand_dir=tmp_path / "candidate" / "out",
                     ref_dir=tmp_path / "reference" / "out")


def test_profile_job_through_the_process_sandbox(tmp_path: Path) -> None:
    """Two regimes (b=4, b=16), one job: warm-up and profiled call each, the worker under the
    stand-in ncu, its report split at the markers into one signature per regime."""
    ctx = _ctx(tmp_path, "cpu", profile={"enabled": True, "timeout_s": 120})
    reports: dict[str, str] = {}
    got = profile.run_profile(ctx, _execution(ctx, tmp_path), str(FAKE_NCU), reports)
    assert got.status == "passed", got.details
    d = got.details
    assert d["exit_code"] == 0 and "fault" not in d and d["profiled"] == 2
    assert d["layout"] == "raw" and d["options"][:3] == ["--csv", "--page", "raw"]
    sigs = regime_signatures(d)
    assert list(sigs) == ["b=4", "b=16"]
    small, large = sigs["b=4"], sigs["b=16"]
    assert small is not None and (small.bottleneck, small.limiter) == ("launch", "short_kernel")
    assert large is not None and (large.bottleneck, large.limiter) == ("memory", "dram_bandwidth")
    assert large.kernel == "_rms_kernel" and large.duration_us == pytest.approx(412.16)
    assert "spin_kernel" in reports["ncu.csv"]
    assert not (tmp_path / "profile" / "out").exists()  # results and report removed once read


def test_a_profile_past_its_deadline_is_skipped_with_the_reason(tmp_path: Path) -> None:
    """A stand-in ncu that never starts the worker: the stage ends at its deadline, skipped
    (the profile is evidence, never a reject)."""
    hang = tmp_path / "hang-ncu"
    hang.write_text("#!/bin/bash\nsleep 60\n")
    hang.chmod(0o755)
    ctx = _ctx(tmp_path, "cpu", profile={"enabled": True, "timeout_s": 3})
    got = profile.run_profile(ctx, _execution(ctx, tmp_path), str(hang))
    assert got.status == "skipped" and not got.reasons
    assert got.details["reason"].startswith("no signature: compile:")
    # the sandbox's own deadline (the same instant) may be the one that kills it
    assert got.details["fault"]["code"] in ("TIMEOUT", "WORKER_PROTOCOL")
    assert got.duration_s < 30
    assert all(r["signature"] is None for r in got.details["signatures"])
