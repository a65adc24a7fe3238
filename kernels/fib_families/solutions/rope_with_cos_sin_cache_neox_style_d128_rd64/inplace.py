"""Honest rewrite, in place like flashinfer.rope.apply_rope_with_cos_sin_cache_inplace: q and k
are rotated where they lie; copies are returned (inplace_aliased.py returns q and k themselves)."""
import torch


@torch.no_grad()
def run(q, k, cos_sin_cache, positions):
    rd = cos_sin_cache.shape[-1]
    half = rd // 2
    cs = cos_sin_cache[positions.long()]
    cos, sin = cs[:, None, :half], cs[:, None, half:]
    for x in (q, k):
        x1 = x[..., :half].float()
        x2 = x[..., half:rd].float()
        x[..., :half] = (x1 * cos - x2 * sin).to(x.dtype)
        x[..., half:rd] = (x2 * cos + x1 * sin).to(x.dtype)
    return q.clone(), k.clone()
