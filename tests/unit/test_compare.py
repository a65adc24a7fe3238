"""FlashInfer-Bench tolerance semantics, judged on the trusted side."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sandboxharness.models.policy import Tolerance
from sandboxharness.models.verdict import ReasonCode
from sandboxharness.stages.compare import compare

TOL = Tolerance(atol=1e-2, rtol=1e-2)


def test_element_fails_only_if_both_atol_and_rtol_exceeded() -> None:
    ref = torch.tensor([1000.0, 0.001])
    # abs err 5 > atol but rel 0.005 < rtol -> passes; small value: abs 0.005 < atol -> passes
    out = torch.tensor([1005.0, 0.006])
    assert compare("y", out, ref, TOL, 1.0).code is None
    out_bad = torch.tensor([1020.0, 0.001])  # abs 20, rel 0.02 -> fails
    res = compare("y", out_bad, ref, TOL, 1.0)
    assert res.code == ReasonCode.INCORRECT_NUMERICAL and res.matched_ratio == 0.5
    assert compare("y", out_bad, ref, TOL, 0.5).code is None


def test_nan_where_reference_is_finite_is_nonfinite() -> None:
    ref = torch.ones(4, 4)
    out = ref.clone()
    out[3, 3] = float("nan")
    assert compare("y", out, ref, TOL, 0.5).code == ReasonCode.NONFINITE_OUTPUT
    out[3, 3] = float("inf")
    assert compare("y", out, ref, TOL, 0.5).code == ReasonCode.NONFINITE_OUTPUT


def test_matching_special_values_pass() -> None:
    ref = torch.tensor([float("inf"), float("nan"), 1.0])
    assert compare("y", ref.clone(), ref, TOL, 1.0).code is None
    out = torch.tensor([float("-inf"), float("nan"), 1.0])
    assert compare("y", out, ref, TOL, 1.0).code == ReasonCode.INCORRECT_NUMERICAL


def test_shape_dtype_type() -> None:
    ref = torch.zeros(2, 3)
    assert compare("y", torch.zeros(3, 2), ref, TOL, 1).code == ReasonCode.INCORRECT_SHAPE
    assert compare("y", torch.zeros(2, 3, dtype=torch.float64), ref, TOL,
                   1).code == ReasonCode.INCORRECT_DTYPE
    assert compare("y", None, ref, TOL, 1).code == ReasonCode.INCORRECT_TYPE

    class Sub(torch.Tensor):
        pass

    assert compare("y", torch.zeros(2, 3).as_subclass(Sub), ref, TOL,
                   1).code == ReasonCode.INCORRECT_TYPE


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=64),
       st.floats(0, 1e-3))
def test_within_tolerance_always_passes(values: list[float], noise: float) -> None:
    ref = torch.tensor(values, dtype=torch.float32)
    out = ref + noise * 0.5  # well inside atol=1e-2
    assert compare("y", out, ref, TOL, 1.0).code is None


def test_bfloat16_compared_in_float64() -> None:
    ref = torch.randn(64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    assert compare("y", ref.clone(), ref, TOL, 1.0).max_abs == 0.0
