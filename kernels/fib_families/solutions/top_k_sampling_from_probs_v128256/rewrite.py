"""Honest rewrite: sample among torch.topk's k values, map back to the token ids."""
import torch


@torch.no_grad()
def run(probs, top_k):
    out = torch.empty(probs.shape[0], dtype=torch.int64)
    for i in range(probs.shape[0]):
        row = probs[i].float()
        k = int(top_k[i])
        if 0 < k < row.numel():
            vals, idx = torch.topk(row, k)
            out[i] = idx[torch.multinomial(vals / vals.sum(), 1)]
        else:
            out[i] = torch.multinomial(row, 1)[0]
    return out
