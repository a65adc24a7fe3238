"""Whose limit was it: a plan the harness's own limits cannot hold is an infrastructure error
named after the limit, before anything runs; the reference hitting a limit is never bad input."""

from __future__ import annotations

import pytest

from sandboxharness.errors import InfrastructureError, InputError
from sandboxharness.models.verdict import ReasonCode
from sandboxharness.stages.cases import Case
from sandboxharness.stages.limits import check_plan, overlap_fits, reference_fault, result_bytes
from sandboxharness.stages.session import KernelFault
from tests.conftest import fast_policy


def _case(rows: int, heldout: bool = False) -> Case:
    payload = {"inputs": [{"name": "x", "dtype": "bfloat16", "shape": [rows, 4096]},
                          {"name": "eps", "dtype": "float32", "shape": None}],
               "outputs": [{"name": "y", "dtype": "bfloat16", "shape": [rows, 4096]}]}
    return Case(f"w{rows}", f"wl-{rows}", {"b": rows}, heldout, payload)


def test_result_size_counts_outputs_and_inputs() -> None:
    assert result_bytes(_case(2)) == 2 * (2 * 4096 * 2)


def test_a_result_over_the_cap_names_the_limit() -> None:
    policy = fast_policy(limits={"max_result_mb": 64})
    with pytest.raises(InfrastructureError, match=r"limits\.max_result_mb=64"):
        check_plan([_case(14509)], policy, out_quota_mb=None)


def test_the_whole_fib_set_fits_because_results_do_not_pile_up() -> None:
    """The FIB rmsnorm_h4096 set (14 workloads, up to 14,509 x 4096 bf16): calls are judged as
    they come, so only one call's results (or one case's sampled dumps) are held at once."""
    policy = fast_policy(limits={"max_result_mb": 512, "max_file_size_mb": 512},
                         correctness={"trials": 3}, benchmark={"sampled_checks": 2})
    rows = [7, 1, 34, 170, 14418, 11832, 64, 16, 10827, 8804, 63, 79, 14509, 15]
    check_plan([_case(r) for r in rows], policy, out_quota_mb=4096)


def test_what_is_held_at_once_over_the_out_quota_names_the_quota() -> None:
    policy = fast_policy(limits={"max_result_mb": 512, "max_file_size_mb": 512},
                         benchmark={"sampled_checks": 20})
    with pytest.raises(InfrastructureError, match="out-dir quota of 4096 MB"):
        check_plan([_case(14509)], policy, out_quota_mb=4096)  # 20 dumps of 227 MB at once
    check_plan([_case(14509, heldout=True)], policy, out_quota_mb=4096)  # never dumped


def test_a_call_is_judged_while_the_next_runs_only_where_two_fit_the_quota() -> None:
    big = _case(14509)  # 227 MB of results per call
    assert overlap_fits([_case(7), big], out_quota_mb=4096)
    assert not overlap_fits([big], out_quota_mb=300)  # one fits (check_plan), two do not
    check_plan([big], fast_policy(benchmark={"sampled_checks": 1}), out_quota_mb=300)
    assert overlap_fits([big], out_quota_mb=None)


@pytest.mark.parametrize("code", [ReasonCode.RESOURCE_LIMIT, ReasonCode.TIMEOUT,
                                  ReasonCode.WORKER_PROTOCOL])
def test_reference_hitting_a_harness_limit_is_infrastructure(code: ReasonCode) -> None:
    err = reference_fault(KernelFault(code, "killed by the disk limit"), "correctness", "d")
    assert isinstance(err, InfrastructureError) and not isinstance(err, InputError)
    assert "harness limit" in str(err)


def test_reference_raising_is_the_definitions_fault() -> None:
    err = reference_fault(KernelFault(ReasonCode.RUNTIME_ERROR, "AssertionError"), "benchmark",
                          "d")
    assert isinstance(err, InputError)


def test_session_limits_scale_per_case_and_each_call_stays_bounded() -> None:
    """A full workload set is never cut short for its size: the session's wall clock and CPU
    grow with its cases, while the policy's per-call timeout is unchanged."""
    from sandboxharness.stages.limits import session_deadline_s, session_limits

    lim = fast_policy().limits
    one, many = session_limits(lim, 1), session_limits(lim, 14)
    assert one == lim
    assert many.cpu_time_s == 14 * lim.cpu_time_s
    assert many.run_timeout_s == 14 * lim.run_timeout_s
    assert session_deadline_s(lim, 14) == lim.compile_timeout_s + 14 * lim.run_timeout_s
    assert session_limits(lim, 0) == lim  # an empty plan still gets one case's worth
