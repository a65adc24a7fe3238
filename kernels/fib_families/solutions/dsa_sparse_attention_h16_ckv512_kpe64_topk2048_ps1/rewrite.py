"""Honest rewrite: all tokens at once, padding masked to -inf instead of filtered out."""
import math

import torch


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    kc = ckv_cache.squeeze(1).float()
    kp = kpe_cache.squeeze(1).float()
    valid = sparse_indices != -1
    idx = sparse_indices.clamp_min(0).long()
    ckv, kpe = kc[idx], kp[idx]
    logits = (torch.einsum("thd,tkd->thk", q_nope.float(), ckv)
              + torch.einsum("thd,tkd->thk", q_pe.float(), kpe)) * sm_scale
    logits = logits.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(logits, dim=-1) / math.log(2.0)
    out = torch.einsum("thk,tkd->thd", torch.softmax(logits, dim=-1), ckv)
    return out.to(torch.bfloat16), lse
