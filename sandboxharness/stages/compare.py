"""Trusted-side comparison of one output against the reference (FlashInfer-Bench semantics).

``compare`` is the float rule (atol AND rtol, matched ratio); ``compare_exact`` the rule for
integer and bool outputs (every element equal: an index off by one is never "within 1e-2").
Set and sampling comparisons live in ``compare_modes`` and ``sampling``.
"""

from __future__ import annotations

from collections.abc import Iterator
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


CHUNK = 1 << 20
"""Elements compared at a time: temporaries of a few MiB instead of whole-output copies
(a 14,509 x 4096 output took 3.5 s and most of it in page faults compared at once)."""


def work_dtype(*ts: torch.Tensor) -> torch.dtype:
    """float32 for outputs of 16 bits or fewer (FlashInfer-Bench compares in float32; every
    such value is exact there, and so is almost every difference), float64 otherwise."""
    return torch.float32 if all(t.element_size() <= 2 for t in ts) else torch.float64


def _flat_chunks(*ts: torch.Tensor) -> Iterator[tuple[torch.Tensor, ...]]:
    flat = [t.reshape(-1) for t in ts]
    work = work_dtype(*ts)
    for i in range(0, flat[0].numel(), CHUNK):
        yield tuple(f[i:i + CHUNK].to(work) for f in flat)


def amplified_tolerance(tol: Tolerance, ref: torch.Tensor) -> Tolerance:
    """The tolerance for inputs scaled far beyond unit scale (``inputs.dists.AMPLIFYING``): the
    absolute part grows to rtol x the output's largest finite magnitude. A reduction's
    summation-order error scales with its terms, not with each result: an honest fp32-accumulating
    GEMM differs from an fp16 reference by ulps of the partial sums (measured: 32 at outputs near
    zero, inputs x300) wherever an output cancels. Overflow (NaN/Inf) and errors at the output's
    own scale still fail."""
    if not ref.is_floating_point() or ref.numel() == 0:
        return tol
    scale, seen = 0.0, False
    for (r,) in _flat_chunks(ref):
        finite = r[torch.isfinite(r)]
        if finite.numel():
            seen, scale = True, max(scale, float(finite.abs().max()))
    return Tolerance(atol=max(tol.atol, tol.rtol * scale), rtol=tol.rtol) if seen else tol


def compare(name: str, out: torch.Tensor | None, ref: torch.Tensor, tol: Tolerance,
            required_ratio: float) -> Comparison:
    """atol AND rtol per element (FlashInfer-Bench), in ``work_dtype``, a chunk at a time. Where the
    reference is finite the output must be too (NONFINITE_OUTPUT); where it is not, the output
    must hold the identical special value."""
    bad = check_kind(name, out, ref)
    if bad is not None or out is None:
        return bad or missing(name)
    if out.numel() == 0:
        return Comparison(None, "empty")
    tiny = torch.finfo(work_dtype(out, ref)).tiny
    nonfinite = failed = 0
    max_abs = max_rel = 0.0
    for o, r in _flat_chunks(out, ref):
        ref_finite, out_finite = torch.isfinite(r), torch.isfinite(o)
        nonfinite += int((ref_finite & ~out_finite).sum())
        both = ref_finite & out_finite
        abs_err = (o - r).abs_().masked_fill_(~both, 0.0)
        rel_err = (abs_err / r.abs().clamp_min_(tiny)).masked_fill_(~both, 0.0)
        fails = both & (abs_err > tol.atol) & (rel_err > tol.rtol)
        special = ~ref_finite
        if bool(special.any()):  # where the reference is non-finite, the identical value
            same = (o == r) | (torch.isnan(o) & torch.isnan(r))
            fails |= special & ~same
        failed += int(fails.sum())
        max_abs = max(max_abs, float(abs_err.max()))
        max_rel = max(max_rel, float(rel_err.max()))
    if nonfinite:
        return Comparison(ReasonCode.NONFINITE_OUTPUT,
                          f"output {name!r} has {nonfinite} NaN/Inf element(s) where the "
                          "reference is finite")
    ratio = 1.0 - failed / out.numel()
    if ratio < required_ratio:
        return Comparison(ReasonCode.INCORRECT_NUMERICAL,
                          f"output {name!r}: {ratio:.4%} of elements within atol={tol.atol} or "
                          f"rtol={tol.rtol} (need {required_ratio:.2%}); max abs err {max_abs:.3g}",
                          max_abs, max_rel, ratio)
    return Comparison(None, "ok", max_abs, max_rel, ratio)
