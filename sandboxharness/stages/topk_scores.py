"""Scores behind a top-k index output that the definition computes itself (not an input).

FlashInfer-Bench judges its DSA top-k indexer by the scores at the returned indices, not by the
indices: a kernel that accumulates in another order may pick another token at the k-th
boundary when two scores are within rounding. This module recomputes those scores on the
trusted side, from the inputs, with FIB's formula; ``compare_modes.compare_set`` then accepts
another selection whose sorted scores match the reference's within the output tolerance.
"""

from __future__ import annotations

from typing import Any

import torch

from ..models import Definition


def _dequant_fp8_k_cache(cache: torch.Tensor) -> torch.Tensor:
    """deep_gemm's packed layout -> [pages, page_size, head_dim] float32 (as the reference)."""
    raw = cache.view(torch.uint8)
    pages, page_size, _, with_scale = raw.shape
    dim = with_scale - 4
    flat = raw.reshape(pages, page_size * with_scale)
    vals = flat[:, :page_size * dim].contiguous().view(torch.float8_e4m3fn).to(torch.float32)
    scale = flat[:, page_size * dim:].contiguous().view(torch.float32)
    return vals.view(pages, page_size, dim) * scale.view(pages, page_size, 1)


def dsa_indexer_scores(inputs: dict[str, Any]) -> torch.Tensor:
    """[batch, num_pages * page_size]: sum_h relu(q_h . k) * w_h for every token a row can
    reach through its block table within its sequence length, -inf elsewhere."""
    keys = _dequant_fp8_k_cache(inputs["k_index_cache_fp8"])
    pages, page_size, dim = keys.shape
    q = inputs["q_index_fp8"].to(torch.float32)
    weights = inputs["weights"].to(torch.float32)
    flat = keys.reshape(pages * page_size, dim)
    scores = (torch.relu(torch.einsum("bhd,td->bht", q, flat)) * weights[:, :, None]).sum(1)
    reachable = torch.zeros_like(scores, dtype=torch.bool)
    for b in range(q.shape[0]):
        n = int(inputs["seq_lens"][b])
        table = inputs["block_table"][b, :(n + page_size - 1) // page_size].to(torch.int64)
        pos = torch.arange(n)
        reachable[b, table[pos // page_size] * page_size + pos % page_size] = True
    out: torch.Tensor = scores.masked_fill(~reachable, float("-inf"))
    return out


_SCORERS = {"dsa_topk_indexer": dsa_indexer_scores}
_NEEDS = {"dsa_topk_indexer": ("q_index_fp8", "k_index_cache_fp8", "weights", "seq_lens",
                               "block_table")}


def derived_scores(definition: Definition, inputs: dict[str, Any]) -> torch.Tensor | None:
    """The scores a known family's top-k output selects from, or None."""
    for prefix, scorer in _SCORERS.items():
        if definition.name.startswith(prefix) and all(
                isinstance(inputs.get(n), torch.Tensor) for n in _NEEDS[prefix]):
            return scorer(inputs)
    return None
