"""Trusted-side comparison of one output against the reference (FlashInfer-Bench semantics).

``compare`` is the float rule (atol AND rtol, matched ratio); ``compare_exact`` the rule for
integer and bool outputs (every element equal: an index off by one is never "within 1e-2").
Set and sampling comparisons live in ``compare_modes`` and ``sampling``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..models.policy import Tolerance
from ..models.verdict import ReasonCode


@dataclass(frozen=True)
class Comparison:
    code: ReasonCode | None
    """None when the output matches."""
    message: str
    max_abs: float = 0.0
    max_rel: float = 0.0
    matched_ratio: float = 1.0
    mode: str = "tolerance"
    extra: dict[str, Any] = field(default_factory=dict)
    """Mode-specific facts for the verdict (e.g. a sampler's TVD)."""


def missing(name: str) -> Comparison:
    return Comparison(ReasonCode.INCORRECT_TYPE, f"output {name!r} missing or not a tensor")


def check_kind(name: str, out: torch.Tensor | None, ref: torch.Tensor) -> Comparison | None:
    """Type, shape and dtype: the same for every mode. None when they all agree."""
    if out is None or type(out) is not torch.Tensor:
        return missing(name)
    if tuple(out.shape) != tuple(ref.shape):
        return Comparison(ReasonCode.INCORRECT_SHAPE,
                          f"output {name!r} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Comparison(ReasonCode.INCORRECT_DTYPE,
                          f"output {name!r} has dtype {out.dtype}, expected {ref.dtype}")
    return None


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-identical (NaN payloads included): what "left unchanged" means for an input."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(a.contiguous().reshape(-1).view(torch.uint8),
                            b.contiguous().reshape(-1).view(torch.uint8)))


def compare_exact(name: str, out: torch.Tensor | None, ref: torch.Tensor) -> Comparison:
    """Integer / bool outputs: every element must equal the reference's."""
    bad = check_kind(name, out, ref)
    if bad is not None or out is None:
        return bad or missing(name)
    if out.numel() == 0:
        return Comparison(None, "empty", mode="exact")
    diff = out != ref
    n = int(diff.sum())
    ratio = 1.0 - n / diff.numel()
    if n:
        first = tuple(int(i) for i in diff.nonzero()[0])
        return Comparison(ReasonCode.INCORRECT_NUMERICAL,
                          f"output {name!r}: {n} of {diff.numel()} element(s) differ from the "
                          f"reference (compared exactly); first at {first}: "
                          f"{out[first].item()} vs {ref[first].item()}",
                          matched_ratio=ratio, mode="exact")
    return Comparison(None, "ok", mode="exact")


def amplified_tolerance(tol: Tolerance, ref: torch.Tensor) -> Tolerance:
    """The tolerance for inputs scaled far beyond unit scale (``inputs.dists.AMPLIFYING``): the
    absolute part grows to rtol x the output's largest finite magnitude. A reduction's
    summation-order error scales with its terms, not with each result: an honest fp32-accumulating
    GEMM differs from an fp16 reference by ulps of the partial sums (measured: 32 at outputs near
    zero, inputs x300) wherever an output cancels. Overflow (NaN/Inf) and errors at the output's
    own scale still fail."""
    finite = ref[torch.isfinite(ref)] if ref.is_floating_point() else ref
    if finite.numel() == 0:
        return tol
    scale = float(finite.abs().max())
    return Tolerance(atol=max(tol.atol, tol.rtol * scale), rtol=tol.rtol)


def compare(name: str, out: torch.Tensor | None, ref: torch.Tensor, tol: Tolerance,
            required_ratio: float) -> Comparison:
    bad = check_kind(name, out, ref)
    if bad is not None or out is None:
        return bad or missing(name)
    if out.numel() == 0:
        return Comparison(None, "empty")
    o = out.to(torch.float64)
    r = ref.to(torch.float64)
    ref_finite = torch.isfinite(r)
    out_finite = torch.isfinite(o)
    bad_nonfinite = ref_finite & ~out_finite
    if bool(bad_nonfinite.any()):
        n = int(bad_nonfinite.sum())
        return Comparison(ReasonCode.NONFINITE_OUTPUT,
                          f"output {name!r} has {n} NaN/Inf element(s) where the reference is finite")
    # where the reference itself is non-finite, demand the identical value
    same_special = (~ref_finite) & ((o == r) | (torch.isnan(o) & torch.isnan(r)))
    both = ref_finite & out_finite
    abs_err = torch.where(both, (o - r).abs(), torch.zeros_like(o))
    rel_err = abs_err / r.abs().clamp_min(torch.finfo(torch.float64).tiny)
    fails = both & (abs_err > tol.atol) & (rel_err > tol.rtol)
    fails |= (~ref_finite) & ~same_special
    ratio = 1.0 - float(fails.sum()) / fails.numel()
    max_abs = float(abs_err.max())
    max_rel = float(torch.where(both, rel_err, torch.zeros_like(rel_err)).max())
    if ratio < required_ratio:
        return Comparison(ReasonCode.INCORRECT_NUMERICAL,
                          f"output {name!r}: {ratio:.4%} of elements within atol={tol.atol} or "
                          f"rtol={tol.rtol} (need {required_ratio:.2%}); max abs err {max_abs:.3g}",
                          max_abs, max_rel, ratio)
    return Comparison(None, "ok", max_abs, max_rel, ratio)
