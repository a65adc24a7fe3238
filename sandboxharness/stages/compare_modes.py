"""Which comparison each output gets, under which tolerance, and the set comparison.

The mode follows the definition, as FlashInfer-Bench's evaluators do (sampling op_type,
integer outputs, top-k index outputs), and the policy can override it per definition or
op_type (``correctness.overrides``); every override applied is named in the verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import torch

from ..models import Definition
from ..models.definition import TensorSpec
from ..models.policy import (
    ComparisonMode,
    ComparisonOverride,
    CorrectnessRules,
    SamplingRules,
    Tolerance,
)
from ..models.verdict import ReasonCode
from .compare import Comparison, check_kind, missing

_FLOAT = {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
          "float4_e2m1"}
_TOPK = re.compile(r"top[-_ ]?k", re.IGNORECASE)
_INDEX_NAME = re.compile(r"(indices|index|idx|ids|topk|top_k)", re.IGNORECASE)
_SCORE_NAME = re.compile(r"(score|logit|prob|weight|value)", re.IGNORECASE)
PAD = -1
"""Padding value of top-k index outputs (FlashInfer-Bench's DSA definitions use -1)."""


def _matches(rule: ComparisonOverride, definition: Definition) -> bool:
    return (any(fnmatchcase(definition.name, g) for g in rule.definitions)
            or any(fnmatchcase(definition.op_type, g) for g in rule.op_types))


def is_sampler(definition: Definition) -> bool:
    """FlashInfer-Bench's rule (``is_sampling_op``): the op_type says so."""
    return definition.op_type == "sampling"


def is_set_output(definition: Definition, name: str, spec: TensorSpec) -> bool:
    """Integer indices of a top-k selection: order carries no meaning."""
    if spec.dtype in _FLOAT or spec.dtype == "bool" or not spec.shape:
        return False
    if not _INDEX_NAME.search(name):
        return False
    texts = [name, definition.name, definition.op_type, definition.description or "",
             spec.description or "", *definition.tags]
    return any(_TOPK.search(t) for t in texts)


def auto_mode(definition: Definition, name: str) -> ComparisonMode:
    spec = definition.outputs[name]
    if is_sampler(definition) and name == next(iter(definition.outputs)):
        return "sampling"  # FlashInfer-Bench: the first output holds the samples
    if spec.dtype in _FLOAT:
        return "tolerance"
    return "set" if is_set_output(definition, name, spec) else "exact"


@dataclass(frozen=True)
class Resolved:
    """The comparison rules for one definition after every matching override."""

    tolerance: Tolerance
    dtype_tolerance: dict[str, Tolerance]
    required_matched_ratio: float
    modes: dict[str, ComparisonMode]
    state_inputs: list[str]
    sampling: SamplingRules
    applied: list[str] = field(default_factory=list)

    def tolerance_for(self, dtype: str) -> Tolerance:
        return self.dtype_tolerance.get(dtype, self.tolerance)

    def describe(self) -> dict[str, Any]:
        return {"overrides_applied": self.applied, "modes": self.modes,
                "required_matched_ratio": self.required_matched_ratio,
                "tolerance": self.tolerance.model_dump(),
                "dtype_tolerance": {k: v.model_dump() for k, v in self.dtype_tolerance.items()},
                "state_inputs_declared": self.state_inputs}


def resolve(definition: Definition, rules: CorrectnessRules) -> Resolved:
    tol, dtype_tol = rules.tolerance, dict(rules.dtype_tolerance)
    ratio, sampling = rules.required_matched_ratio, rules.sampling
    mode_globs: dict[str, ComparisonMode] = {}
    state: list[str] = []
    applied: list[str] = []
    for rule in rules.overrides:
        if not _matches(rule, definition):
            continue
        applied.append(rule.name)
        if rule.tolerance is not None:  # replaces the per-dtype table too
            tol, dtype_tol = rule.tolerance, {}
        dtype_tol.update(rule.dtype_tolerance)
        if rule.required_matched_ratio is not None:
            ratio = rule.required_matched_ratio
        mode_globs.update(rule.modes)
        state.extend(rule.state_inputs)
        if rule.sampling is not None:
            sampling = rule.sampling
    modes: dict[str, ComparisonMode] = {}
    for out in definition.outputs:
        mode: ComparisonMode = "auto"
        for glob, m in mode_globs.items():  # later (and more specific, by order) wins
            if fnmatchcase(out, glob):
                mode = m
        modes[out] = auto_mode(definition, out) if mode == "auto" else mode
    declared = sorted({n for n in definition.inputs if any(fnmatchcase(n, g) for g in state)})
    return Resolved(tol, dtype_tol, ratio, modes, declared, sampling, applied)


def score_input(definition: Definition, out_name: str,
                inputs: dict[str, Any], out_shape: tuple[int, ...]) -> torch.Tensor | None:
    """The scores a top-k output selects from, when they are an input (same leading dims,
    a last dim at least k): lets a tie at the k-th score be judged. None when ambiguous."""
    found = []
    for name, spec in definition.inputs.items():
        t = inputs.get(name)
        if spec.dtype not in _FLOAT or not isinstance(t, torch.Tensor) or t.dim() != len(out_shape):
            continue
        if tuple(t.shape[:-1]) == out_shape[:-1] and t.shape[-1] >= out_shape[-1]:
            found.append((name, t))
    if len(found) > 1:
        found = [(n, t) for n, t in found if _SCORE_NAME.search(n)]
    return found[0][1] if len(found) == 1 else None


def _row_ok_with_ties(cand: torch.Tensor, ref: torch.Tensor, scores: torch.Tensor,
                      tol: Tolerance | None, ratio: float) -> bool:
    c, r = cand[cand != PAD], ref[ref != PAD]
    if c.numel() != r.numel() or c.numel() == 0:
        return c.numel() == r.numel()
    n = scores.numel()
    if bool(((c < 0) | (c >= n)).any()) or torch.unique(c).numel() != c.numel():
        return False
    got, want = scores[c.long()], scores[r.long()]
    if not bool(torch.isfinite(got).all()):
        return False  # a token the row cannot reach
    if tol is None:  # exact scores from an input: ties only
        return bool((got >= want.min()).all())
    # recomputed scores (FIB's DSA indexer rule): sorted scores within the output tolerance
    a = got.double().sort(descending=True).values
    b = want.double().sort(descending=True).values
    err = (a - b).abs()
    fails = (err > tol.atol) & (err / b.abs().clamp_min(torch.finfo(torch.float64).tiny) > tol.rtol)
    return 1.0 - float(fails.double().mean()) >= ratio


def compare_set(name: str, out: torch.Tensor | None, ref: torch.Tensor,
                scores: torch.Tensor | None, *, tol: Tolerance | None = None,
                ratio: float = 1.0) -> Comparison:
    """Per row (last dim): the same indices as the reference in any order, the same count of
    ``-1`` padding. With the scores at hand another selection is accepted: distinct, in range,
    reachable, and either every score >= the reference's k-th (``tol`` None: exact scores from
    an input, so only ties) or, for scores recomputed on the host (``topk_scores``), sorted
    scores matching the reference's within ``tol`` for ``ratio`` of them (FIB's rule)."""
    bad = check_kind(name, out, ref)
    if bad is not None or out is None:
        return bad or missing(name)
    if out.numel() == 0:
        return Comparison(None, "empty", mode="set")
    k = out.shape[-1] if out.dim() else 1
    o_rows, r_rows = out.reshape(-1, k), ref.reshape(-1, k)
    same = (o_rows.sort(dim=1).values == r_rows.sort(dim=1).values).all(dim=1)
    bad_rows = [int(i) for i in (~same).nonzero().flatten()]
    flat_scores = scores.reshape(-1, scores.shape[-1]) if scores is not None else None
    if flat_scores is not None:
        bad_rows = [i for i in bad_rows
                    if not _row_ok_with_ties(o_rows[i], r_rows[i], flat_scores[i], tol, ratio)]
    ratio = 1.0 - len(bad_rows) / o_rows.shape[0]
    if bad_rows:
        i = bad_rows[0]
        extra = set(o_rows[i].tolist()) - set(r_rows[i].tolist())
        return Comparison(ReasonCode.INCORRECT_NUMERICAL,
                          f"output {name!r}: {len(bad_rows)} of {o_rows.shape[0]} row(s) select "
                          f"other indices than the reference (compared as sets); row {i} has "
                          f"{sorted(extra)[:5]} not in the reference's"
                          + (" and no tie with its k-th score" if flat_scores is not None else ""),
                          matched_ratio=ratio, mode="set")
    return Comparison(None, "ok", mode="set", extra={
        "scores": "none" if flat_scores is None else "input" if tol is None else "recomputed"})
