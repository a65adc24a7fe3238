"""Held-out input distributions: the same inputs, drawn beyond unit-scale randn.

A fast path that overflows in fp16 beyond |x|~256, underflows at small scales, mishandles
zero rows or channel outliers, or ignores a weight that happens to be ~1 passes on randn alone.
Each trial after the first draws its inputs from one of these (the host names it in the case
payload by trial seed, and in a failing verdict's message). Only float inputs are touched, never
indices, lengths, offsets, probabilities or logits that feed a discrete choice.
"""

from __future__ import annotations

from typing import Any

import torch

from .recipes import magnitudes

DISTRIBUTIONS = ("plain", "scaled_up", "scaled_down", "outlier_channels", "zero_rows",
                 "negative", "nonunit_weights")

_HALF = (torch.float16, torch.bfloat16)
_FULL = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_UP = {torch.float16: 300.0, torch.bfloat16: 1e3}
"""x * factor: past fp16's |x|~256 squaring limit, well inside its finite range (65504)."""
AMPLIFYING = frozenset({"scaled_up", "outlier_channels"})
"""Only on 16-bit activations, and (the host's choice) only where no output is fp32/fp64: with
fp32's atol of 1e-5, an honest kernel's summation-order error grows with the input scale past
the tolerance (abs AND rel) wherever an output cancels to near zero (a matmul, an attention
lse), so those cases get the other distributions."""
_ACTIVATION_ROLES = ("data",)
_WEIGHT_ROLES = ("weight", "scale")


def applies(dist: str, item: dict[str, Any], dtype: torch.dtype) -> bool:
    """Does ``dist`` change this (generated, tensor) input? The host uses it to pick only
    distributions that change something in a case, the worker to apply them."""
    role = item.get("role") or "data"
    if dist == "nonunit_weights":
        return role in _WEIGHT_ROLES and dtype in _FULL
    if dist == "plain" or not item.get("act") or role not in _ACTIVATION_ROLES:
        return False
    return dtype in (_HALF if dist in AMPLIFYING else _FULL)


def apply(dist: str, item: dict[str, Any], t: torch.Tensor, gen: torch.Generator) -> None:
    """Transform ``t`` in place (bounded memory: no full-size temporaries)."""
    if not applies(dist, item, t.dtype) or t.numel() == 0:
        return
    if dist == "nonunit_weights":
        magnitudes(t, gen, signed=(item.get("role") != "scale"))
    elif dist == "scaled_up":
        limit = torch.finfo(t.dtype).max / 4
        t.mul_(_UP[t.dtype]).clamp_(-limit, limit)
    elif dist == "scaled_down":
        t.mul_(1e-3)
    elif dist == "negative":
        t.abs_().neg_()
    elif dist == "zero_rows":
        rows = t.shape[0] if t.dim() else 1
        k = max(1, rows // 4)
        idx = torch.randperm(rows, generator=gen)[:k]
        (t.view(1) if t.dim() == 0 else t)[idx] = 0
    elif dist == "outlier_channels":
        last = t.shape[-1] if t.dim() else 1
        k = max(1, last // 64)
        cols = torch.randperm(last, generator=gen)[:k]
        view = t.view(-1, last) if t.dim() else t.view(1, 1)
        view[:, cols] *= 100.0
