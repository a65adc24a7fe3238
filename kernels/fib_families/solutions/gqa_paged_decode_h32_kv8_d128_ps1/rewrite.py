"""Honest rewrite: every query head of a sequence at once, KV heads repeated for GQA."""
import math

import torch


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    batch, hq, dim = q.shape
    hk = k_cache.shape[2]
    out = torch.zeros(batch, hq, dim, dtype=torch.bfloat16)
    lse = torch.full((batch, hq), -float("inf"))
    kf, vf = k_cache.squeeze(1).float(), v_cache.squeeze(1).float()
    for b in range(batch):
        ids = kv_indices[int(kv_indptr[b]):int(kv_indptr[b + 1])].long()
        if ids.numel() == 0:
            continue
        kb = kf[ids].repeat_interleave(hq // hk, dim=1)
        vb = vf[ids].repeat_interleave(hq // hk, dim=1)
        logits = torch.einsum("hd,thd->ht", q[b].float(), kb) * sm_scale
        lse[b] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        out[b] = torch.einsum("ht,thd->hd", torch.softmax(logits, dim=-1), vb).to(torch.bfloat16)
    return out, lse
