"""Stochastic outputs, judged as FlashInfer-Bench's sampling evaluator does.

Every sample must lie inside its row's allowed set (top-k with ties at the k-th probability,
top-p with a small slack at the nucleus boundary); then, when many samples of the same inputs
are at hand, each row's sample frequencies are compared with the expected distribution (the
masked, renormalised probabilities) by total variation distance. The expected distribution
comes from the inputs on the trusted side, never from the candidate.

Many samples per row need many calls on the same inputs: the worker returns them stacked as
``rep.<output>`` ``[n, *shape]`` (see ``judge_sampling``); without them only the validity
mask is judged and the details say the distribution was not.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import InputError
from ..models import Definition
from ..models.policy import SamplingRules
from ..models.verdict import ReasonCode
from .compare import Comparison, check_kind, missing

SAMPLES_PER_TOKEN = 50
"""TVD is judged on a row only with at least this many samples per token of its allowed set
(noise then ~0.06, well under FlashInfer-Bench's 0.2 threshold)."""


def thresholding(definition: Definition) -> str:
    """FlashInfer-Bench's ``_detect_thresholding_method``: from the definition's name."""
    name = definition.name.lower()
    for method in ("top_k_top_p", "top_k", "top_p"):
        if method in name:
            return method
    return "none"


def _per_row(value: Any, rows: int, dtype: torch.dtype) -> torch.Tensor:
    t = value if isinstance(value, torch.Tensor) else torch.tensor(value)
    t = t.to(dtype).reshape(-1)
    return t.expand(rows) if t.numel() == 1 else t


def valid_mask(probs: torch.Tensor, method: str, params: dict[str, Any],
               eps: float = 5e-2) -> torch.Tensor:
    """[rows, vocab] bool: the tokens a correct sampler may return for each row."""
    p = probs.to(torch.float64).reshape(-1, probs.shape[-1])
    rows, vocab = p.shape
    mask = torch.ones_like(p, dtype=torch.bool)
    ordered, order = torch.sort(p, dim=1, descending=True)
    if method in ("top_k", "top_k_top_p"):
        k = _per_row(params["top_k"], rows, torch.int64)
        pivot = ordered.gather(1, (k - 1).clamp(0, vocab - 1).unsqueeze(1))
        active = ((k > 0) & (k < vocab)).unsqueeze(1)
        mask &= ~active | (p >= pivot)  # any token tied with the k-th is allowed
    if method in ("top_p", "top_k_top_p"):
        top_p = _per_row(params["top_p"], rows, torch.float64)
        nucleus = torch.cumsum(ordered, dim=1) <= (top_p + eps).unsqueeze(1)
        nucleus[:, 0] = True
        in_p = torch.zeros_like(mask).scatter(1, order, nucleus)
        active = ((top_p > 0) & (top_p < 1)).unsqueeze(1)
        mask &= ~active | in_p
    return mask


def expected_distribution(probs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    p = probs.to(torch.float64).reshape(mask.shape) * mask
    return p / p.sum(dim=1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)


_NEEDS = {"top_k": ["top_k"], "top_p": ["top_p"], "top_k_top_p": ["top_k", "top_p"]}


def _inputs(definition: Definition, inputs: dict[str, Any],
            method: str) -> tuple[Any, dict[str, Any]]:
    if "probs" not in inputs:
        raise InputError("sampling comparison needs an input named 'probs' (as "
                         "FlashInfer-Bench's sampling evaluator does)", where=definition.name)
    params: dict[str, Any] = {n: inputs[n] for n in ("top_k", "top_p") if n in inputs}
    for need in _NEEDS.get(method, []):
        if params.get(need) is None:
            raise InputError(f"{method} sampling needs the input {need!r}", where=definition.name)
    return inputs["probs"], params


def judge_sampling(definition: Definition, name: str, out: torch.Tensor | None,
                   ref: torch.Tensor, *, inputs: dict[str, Any], rules: SamplingRules,
                   repeats: torch.Tensor | None = None) -> Comparison:
    """``out``: one call's samples (shape of the reference's); ``repeats``: ``[n, *shape]``
    samples of n calls on the same inputs, when the worker made them."""
    bad = check_kind(name, out, ref)
    if bad is not None or out is None:
        return bad or missing(name)
    method = thresholding(definition)
    probs, params = _inputs(definition, inputs, method)
    mask = valid_mask(probs, method, params, rules.top_p_eps)
    rows, vocab = mask.shape
    samples = out.reshape(1, -1) if repeats is None else torch.cat(
        [out.reshape(1, -1), repeats.reshape(repeats.shape[0], -1)])
    if samples.shape[1] != rows:
        return Comparison(ReasonCode.INCORRECT_SHAPE, f"output {name!r}: {samples.shape[1]} "
                          f"sample(s) per call for {rows} row(s) of probabilities", mode="sampling")
    s = samples.to(torch.int64)
    outside = (s < 0) | (s >= vocab)
    if bool(outside.any()):
        return Comparison(ReasonCode.INCORRECT_NUMERICAL, f"output {name!r}: sample "
                          f"{int(s[outside][0])} is outside the vocabulary [0, {vocab})",
                          matched_ratio=0.0, mode="sampling")
    allowed = mask.gather(1, s.t())  # [rows, n]
    if not bool(allowed.all()):
        row = int((~allowed).any(dim=1).nonzero()[0])
        tok = int(s[:, row][~allowed[row]][0])
        return Comparison(ReasonCode.INCORRECT_NUMERICAL, f"output {name!r}: sample {tok} of "
                          f"row {row} is outside the row's valid {method} set",
                          matched_ratio=float(allowed.float().mean()), mode="sampling")
    n = s.shape[0]
    extra: dict[str, Any] = {"method": method, "samples_per_row": n,
                             "distribution_checked": n >= rules.min_samples_per_row}
    if n < rules.min_samples_per_row:
        extra["distribution_note"] = (f"{n} sample(s) per row, under min_samples_per_row="
                                      f"{rules.min_samples_per_row}: validity mask only")
        return Comparison(None, "ok", mode="sampling", extra=extra)
    freq = torch.zeros(rows, vocab, dtype=torch.float64)
    freq.scatter_add_(1, s.t(), torch.ones(rows, n, dtype=torch.float64))
    tvd = 0.5 * (freq / n - expected_distribution(probs, mask)).abs().sum(dim=1)
    # an empirical distribution over k tokens sits ~0.5*sqrt(2k/(pi*n)) from the true one:
    # judge a row only with enough samples for its support, so noise never rejects
    judged = n >= SAMPLES_PER_TOKEN * mask.sum(dim=1)
    extra["rows_distribution_checked"] = int(judged.sum())
    if not bool(judged.any()):
        extra["distribution_checked"] = False
        extra["distribution_note"] = (f"{n} sample(s) per row: under {SAMPLES_PER_TOKEN} per "
                                      "allowed token in every row, validity mask only")
        return Comparison(None, "ok", mode="sampling", extra=extra)
    tvd = torch.where(judged, tvd, torch.zeros_like(tvd))
    worst = float(tvd.max())
    extra.update(tvd=worst, tvd_threshold=rules.tvd_threshold)
    if worst > rules.tvd_threshold:
        return Comparison(ReasonCode.INCORRECT_NUMERICAL, f"output {name!r}: sample "
                          f"distribution of row {int(tvd.argmax())} is {worst:.3f} (total "
                          f"variation) from the expected one over {n} samples (threshold "
                          f"{rules.tvd_threshold})", max_abs=worst, mode="sampling", extra=extra)
    return Comparison(None, "ok", max_abs=worst, mode="sampling", extra=extra)
