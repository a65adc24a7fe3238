"""Input recipes by role: values that are valid for what an input means.

Shared by both sides (stdlib + torch only): the host resolves every bound of a recipe to a
plain integer when it builds the case payload, so a recipe needs only its payload item, the
concrete shape and dtype, and a seeded CPU generator. Large float tensors are filled in place,
chunk by chunk, in their own dtype: no float32 copy of a multi-GB tensor is ever made.
"""

from __future__ import annotations

import math
from typing import Any

import torch

ROLES = frozenset({
    "data", "weight", "bias", "scale", "logits", "routing", "probs", "uniform", "temperature",
    "top_p", "top_k", "eps", "mask", "flag", "const", "offset", "indptr", "index", "page",
    "slot", "sparse", "length",
})
"""Every recipe name (``CorrectnessRules.input_roles`` values are checked against a copy)."""

CHUNK = 1 << 22
"""Elements filled per step (fixed: the values depend on it, both sides must agree)."""

_WIDE = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
TOP_K_MAX = 64
"""A sampled top_k stays in [1, min(vocab, 64)]: valid, what serving uses, and small enough for
a sampling judge's total-variation test to tell distributions apart."""


def _fill(t: torch.Tensor, gen: torch.Generator, how: str, lo: float = 0.0,
          hi: float = 1.0) -> torch.Tensor:
    """``normal``/``uniform`` in place; fp8 goes through a bounded float32 chunk (clamped)."""
    flat = t.view(-1)
    for a in range(0, flat.numel(), CHUNK):
        part = flat[a:a + CHUNK]
        buf = part if t.dtype in _WIDE else torch.empty(part.numel(), dtype=torch.float32)
        if how == "normal":
            buf.normal_(generator=gen)
        else:
            buf.uniform_(lo, hi, generator=gen)
        if buf is not part:
            part.copy_(buf.clamp_(-2.0, 2.0))  # FIB's low-precision range
    return t


def magnitudes(t: torch.Tensor, gen: torch.Generator, signed: bool) -> torch.Tensor:
    """Away from 1: 2**U(-1, 1) in [0.5, 2], with a random sign when ``signed``."""
    _fill(t, gen, "uniform", -1.0, 1.0)
    flat = t.view(-1)
    for a in range(0, flat.numel(), CHUNK):
        part = flat[a:a + CHUNK]
        sign = None
        if signed:
            sign = torch.randint(0, 2, (part.numel(),), generator=gen).to(part.dtype)
        part.exp2_()
        if sign is not None:
            part.mul_(sign.mul_(2).sub_(1))
    return t


def _segments(n: int, total: int, gen: torch.Generator,
              cap: torch.Tensor | None = None) -> torch.Tensor:
    """``n`` non-negative parts summing to ``total`` (each >= 1 when total >= n), or, with
    ``cap``, parts ``0 <= p_i <= cap_i`` (the host checked ``total <= cap.sum()``)."""
    if n <= 0:
        return torch.zeros(0, dtype=torch.int64)
    if cap is not None and 0 <= total <= int(cap.sum()):
        share = (cap.double() * (total / max(int(cap.sum()), 1))).floor().long()
        share = torch.minimum(share, cap)
        left = total - int(share.sum())
        for i in torch.randperm(n, generator=gen).tolist():  # the remainder, one by one
            room = min(left, int(cap[i] - share[i]))
            share[i] += room
            left -= room
        return share
    base = 1 if total >= n else 0
    rest = total - base * n
    cuts = torch.randint(0, rest + 1, (n - 1,), generator=gen).sort().values
    edges = torch.cat([torch.zeros(1, dtype=torch.int64), cuts, torch.tensor([rest])])
    return edges.diff() + base


def _distinct_rows(rows: int, k: int, high: int, gen: torch.Generator) -> torch.Tensor:
    """``rows`` x ``k`` values in [0, high), distinct within each row (``k <= high``)."""
    out = torch.empty(rows, k, dtype=torch.int64)
    if k * 2 >= high:  # dense: a permutation per row is cheap enough
        for r in range(rows):
            out[r] = torch.randperm(high, generator=gen)[:k]
        return out
    m = k + k // 2 + 16  # sparse: oversample, drop duplicates, top up rows that fell short
    for a in range(0, rows, max(1, CHUNK // m)):
        b = min(rows, a + max(1, CHUNK // m))
        cand = torch.randint(0, high, (b - a, m), generator=gen)
        srt = cand.sort(dim=1).values
        dup = torch.zeros_like(srt, dtype=torch.bool)
        dup[:, 1:] = srt[:, 1:] == srt[:, :-1]
        key = torch.rand(b - a, m, generator=gen).masked_fill_(dup, 2.0)
        pick = key.argsort(dim=1)[:, :k]
        out[a:b] = srt.gather(1, pick)
        short = (~dup).sum(dim=1) < k
        for r in short.nonzero().flatten().tolist():
            out[a + r] = torch.randperm(high, generator=gen)[:k]
    return out


def _index_tensor(role: str, p: dict[str, Any], shape: tuple[int, ...],
                  gen: torch.Generator) -> torch.Tensor:
    high, numel = int(p.get("high", 1)), math.prod(shape)
    last = shape[-1] if shape else 1
    unique = p.get("unique", "none")
    if numel == 0:
        return torch.zeros(shape, dtype=torch.int64)
    if role == "slot" or unique == "all":
        if numel * 2 < high:
            return _distinct_rows(1, numel, high, gen).reshape(shape)
        return torch.randperm(high, generator=gen)[:numel].reshape(shape)
    if role == "sparse":
        rows = numel // max(last, 1)
        k = min(last, high)
        vals = torch.full((rows, last), -1, dtype=torch.int64)
        if k:
            vals[:, :k] = _distinct_rows(rows, k, high, gen)
            if p.get("pad"):  # some rows shorter, padded with -1 at the tail
                keep = torch.randint(1, k + 1, (rows,), generator=gen)
                full = torch.rand(rows, generator=gen) < 0.5
                keep = torch.where(full, torch.full_like(keep, k), keep)
                vals[torch.arange(last).expand(rows, last) >= keep[:, None]] = -1
        return vals.reshape(shape)
    if unique == "row" and last <= high:
        return _distinct_rows(numel // max(last, 1), last, high, gen).reshape(shape)
    return torch.randint(0, high, shape, generator=gen)


def make_tensor(item: dict[str, Any], shape: tuple[int, ...], dtype: torch.dtype,
                gen: torch.Generator, done: dict[str, torch.Tensor]) -> torch.Tensor:
    """One tensor input by its role (``done``: inputs made so far, for ``within`` links)."""
    role = item.get("role") or "data"
    p: dict[str, Any] = item.get("params") or {}
    if role in ("index", "page", "slot", "sparse"):
        return _index_tensor(role, p, shape, gen).to(dtype)
    if role == "indptr":
        n = (shape[0] - 1) if shape else 0
        cap = None
        other = done.get(str(p.get("within", "")))
        if other is not None and other.numel() == n + 1:
            unit = int(p.get("unit", 1))
            kv = other.long().diff()
            cap = torch.where(kv > 0, (kv - 1) * unit + 1, torch.zeros_like(kv))
        seg = _segments(n, int(p.get("total", 0)), gen, cap)
        return torch.cat([torch.zeros(1, dtype=torch.int64), seg.cumsum(0)]).to(dtype)
    if role in ("length", "top_k"):
        lo, hi = int(p.get("low", 1)), max(int(p.get("high", 64)), int(p.get("low", 1)))
        if role == "top_k":  # log-uniform over what serving uses (and a TVD can judge)
            hi = max(lo, min(hi, TOP_K_MAX))
            u = torch.rand(shape, generator=gen, dtype=torch.float64)
            k = (math.log(lo) + u * (math.log(hi + 1) - math.log(lo))).exp().floor()
            return k.clamp_(lo, hi).to(dtype)
        return torch.randint(lo, hi + 1, shape, generator=gen).to(dtype)
    if role in ("offset", "const"):
        return torch.full(shape, int(p.get("value", 0)), dtype=dtype)
    if dtype == torch.bool or role in ("mask", "flag"):
        return torch.randint(0, 2, shape, generator=gen).to(dtype)
    if not dtype.is_floating_point:
        return torch.randint(0, 64, shape, generator=gen).to(dtype)
    t = torch.empty(shape, dtype=dtype)
    if role == "probs":
        x = torch.empty(shape, dtype=torch.float32).normal_(generator=gen)
        return torch.softmax(x, dim=-1).to(dtype) if shape else x.fill_(1.0).to(dtype)
    if role in ("scale", "temperature"):
        return _fill(t, gen, "uniform", 0.5, 1.5)
    if role in ("uniform", "top_p"):
        return _fill(t, gen, "uniform", 0.1 if role == "top_p" else 0.0, 1.0)
    if role == "eps":
        return t.fill_(1e-6)
    return _fill(t, gen, "normal")


def make_scalar(item: dict[str, Any], gen: torch.Generator) -> int | float | bool:
    """A random scalar of the declared kind: an int32 scalar is an int, never a float."""
    role = item.get("role") or "data"
    p: dict[str, Any] = item.get("params") or {}
    dtype = str(item.get("dtype", "float32"))
    u = float(torch.rand((), generator=gen))
    if role in ("const", "offset"):
        value: float = float(p.get("value", 0))
    elif role in ("top_k", "length"):
        lo, hi = int(p.get("low", 1)), max(int(p.get("high", 64)), int(p.get("low", 1)))
        if role == "top_k":
            hi = max(lo, min(hi, TOP_K_MAX))
            value = min(hi, max(lo, math.floor(math.exp(math.log(lo) + u * (
                math.log(hi + 1) - math.log(lo))))))
        else:
            value = lo + min(int(u * (hi - lo + 1)), hi - lo)
    elif role in ("flag", "mask") or dtype == "bool":
        value = float(u < 0.5)
    elif role == "scale":
        value = 0.1 + 0.9 * u
    elif role == "temperature":
        value = 0.5 + u
    elif role in ("top_p", "uniform"):
        value = (0.1 + 0.9 * u) if role == "top_p" else u
    elif role == "eps":
        value = 1e-6
    elif dtype.startswith(("int", "uint")):
        value = 1 + min(int(u * 8), 7)
    else:
        value = float(torch.randn((), generator=gen))
    return cast_scalar(value, dtype)


def cast_scalar(value: int | float | bool, dtype: str) -> int | float | bool:
    if dtype == "bool":
        return bool(value)
    if dtype.startswith(("int", "uint")):
        return int(value)
    return float(value)
