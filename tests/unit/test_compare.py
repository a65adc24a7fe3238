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


def test_16_bit_outputs_are_compared_in_float32_as_fib_does() -> None:
    from sandboxharness.stages.compare import work_dtype

    ref = torch.randn(64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    assert compare("y", ref.clone(), ref, TOL, 1.0).max_abs == 0.0
    assert work_dtype(ref, ref) == torch.float32
    assert work_dtype(ref.float(), ref.float()) == torch.float64  # 32-bit: in float64
    # one ulp of bf16 at 1.0 is 2**-7: over atol=rtol=1e-3, caught in float32 as in float64
    one = torch.ones(4, dtype=torch.bfloat16)
    off = one + torch.tensor([0.0, 0.0, 0.0, 2**-7]).to(torch.bfloat16)
    tight = Tolerance(atol=1e-3, rtol=1e-3)
    got = compare("y", off, one, tight, 1.0)
    assert got.code == ReasonCode.INCORRECT_NUMERICAL and got.max_abs == 2**-7


def test_amplified_inputs_judge_a_reduction_at_its_own_scale() -> None:
    """Held-out 'scaled_up' inputs (x300) through an fp16 GEMM: the honest fp32-accumulating
    kernel differs from the fp16 reference by ulps of the partial sums where an output cancels
    to near zero. Seen on FIB's gemm_n4096_k4096 (max abs err 32, 99.9997 % matched), an honest
    rejection. At the output's own scale it passes; saturation and NaN still fail."""
    from sandboxharness.stages.compare import amplified_tolerance

    g = torch.Generator().manual_seed(7)
    a = (torch.randn(64, 4096, generator=g) * 300).half()
    b = torch.randn(512, 4096, generator=g).half()
    ref = torch.matmul(a, b.T)
    honest = (a.float() @ b.float().T).half()
    tol = Tolerance(atol=1e-2, rtol=1e-2)
    wide = amplified_tolerance(tol, ref)
    assert wide.rtol == tol.rtol and wide.atol > tol.atol
    assert compare("C", honest, ref, wide, 1.0).code is None
    saturated = honest.clamp(-2000, 2000)
    assert compare("C", saturated, ref, wide, 1.0).code == ReasonCode.INCORRECT_NUMERICAL
    broken = honest.clone()
    broken[0, 0] = float("nan")
    assert compare("C", broken, ref, wide, 1.0).code == ReasonCode.NONFINITE_OUTPUT
    # nothing finite in the reference: the tolerance is left as it was
    assert amplified_tolerance(tol, torch.full((3,), float("inf"))) == tol


def _whole(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> tuple[int, int, float, float]:
    """The rule written out on whole tensors: (non-finite where ref finite, failures, max abs,
    max rel), what the chunked ``compare`` must reproduce."""
    from sandboxharness.stages.compare import work_dtype

    work = work_dtype(out, ref)
    o, r = out.to(work), ref.to(work)
    rf, of = torch.isfinite(r), torch.isfinite(o)
    both = rf & of
    abs_err = torch.where(both, (o - r).abs(), torch.zeros_like(o))
    rel = torch.where(both, abs_err / r.abs().clamp_min(torch.finfo(work).tiny),
                      torch.zeros_like(o))
    same = (o == r) | (torch.isnan(o) & torch.isnan(r))
    fails = (both & (abs_err > tol.atol) & (rel > tol.rtol)) | (~rf & ~same)
    return (int((rf & ~of).sum()), int(fails.sum()), float(abs_err.max()), float(rel.max()))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from([torch.float32, torch.bfloat16, torch.float16]),
       st.integers(1, 3000), st.floats(0.0, 0.3))
def test_chunked_compare_equals_the_whole_tensor_rule(seed: int, dtype: torch.dtype, n: int,
                                                     noise: float) -> None:
    """compare() works a chunk at a time (bounded memory); across chunk boundaries, with
    NaN/Inf on either side, it gives the same counts and maxima as the rule on whole tensors."""
    import sandboxharness.stages.compare as cmp

    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(n, generator=g).to(dtype)
    out = (ref.float() + noise * torch.randn(n, generator=g)).to(dtype)
    for t, k in ((ref, 0), (out, 1)):
        idx = torch.randint(0, n, (max(1, n // 50),), generator=g)
        t[idx] = (float("nan"), float("inf"), -float("inf"))[(seed + k) % 3]
    tol = Tolerance(atol=1e-2, rtol=1e-2)
    nonfinite, failures, max_abs, max_rel = _whole(out, ref, tol)
    old, cmp.CHUNK = cmp.CHUNK, 257  # many chunks, boundaries anywhere
    try:
        got = compare("y", out, ref, tol, 1.0)
    finally:
        cmp.CHUNK = old
    if nonfinite:
        assert got.code == ReasonCode.NONFINITE_OUTPUT and f" {nonfinite} " in got.message
        return
    assert got.matched_ratio == 1.0 - failures / n
    assert (got.code is None) == (failures == 0)
    assert got.max_abs == max_abs and got.max_rel == max_rel
