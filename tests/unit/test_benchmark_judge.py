"""Trusted-side timing judgement: reported timings are checked against the host's own clock."""

from __future__ import annotations

from pathlib import Path

from sandboxharness.intake import load_definition, load_workloads
from sandboxharness.stages.benchmark import timing
from sandboxharness.stages.cases import build_cases
from sandboxharness.stages.execute import BenchResult, RoleRun
from tests.conftest import fast_policy


def _runs(tiny_def_path: Path, tiny_wl_path: Path, times: list[float], host_s: float):  # type: ignore[no-untyped-def]
    d = load_definition(tiny_def_path)
    policy = fast_policy(benchmark={"sampled_checks": 0})
    case = build_cases(d, load_workloads(tiny_wl_path), policy)[0]
    cand = RoleRun("candidate", benches=[BenchResult(case, [1] * len(times), times, host_s)])
    ref = RoleRun("reference", benches=[BenchResult(case, [1] * len(times), times, host_s)])
    return d, policy, cand, ref


def _codes(tiny_def_path: Path, tiny_wl_path: Path, times: list[float], host_s: float) -> set[str]:
    d, policy, cand, ref = _runs(tiny_def_path, tiny_wl_path, times, host_s)
    reasons, _ = timing.judge(d, policy, cand, ref, cand_dir=Path("."), ref_dir=Path("."),
                              data_dir=".", device="cpu")
    return {r.code.value for r in reasons}


def test_honest_timings_pass(tiny_def_path, tiny_wl_path) -> None:
    assert _codes(tiny_def_path, tiny_wl_path, [0.05] * 10, 0.55) == set()


def test_a_scheduler_stall_does_not_reject_an_honest_kernel(tiny_def_path, tiny_wl_path) -> None:
    """Tiny calls (20 us) and a 100 ms stall of the busy host between them: still honest."""
    assert _codes(tiny_def_path, tiny_wl_path, [2e-5] * 10, 0.12) == set()


def test_a_lying_clock_is_caught(tiny_def_path, tiny_wl_path) -> None:
    """The worker claims 1 us per call while the host watched 10 calls take 2 s."""
    assert _codes(tiny_def_path, tiny_wl_path, [1e-6] * 10, 2.0) == {"TIMING_INCONSISTENT"}


def test_reporting_more_time_than_passed_is_caught(tiny_def_path, tiny_wl_path) -> None:
    assert _codes(tiny_def_path, tiny_wl_path, [0.5] * 10, 1.0) == {"TIMING_INCONSISTENT"}


def test_speedup_and_dispersion_are_reported(tiny_def_path, tiny_wl_path) -> None:
    d, policy, cand, ref = _runs(tiny_def_path, tiny_wl_path, [0.01, 0.011, 0.012, 0.01], 0.05)
    _, details = timing.judge(d, policy, cand, ref, cand_dir=Path("."), ref_dir=Path("."),
                              data_dir=".", device="cpu")
    w = details["workloads"][0]
    assert w["speedup"] == 1.0 and w["candidate"]["n"] == 4 and w["candidate"]["dispersion"] >= 0
