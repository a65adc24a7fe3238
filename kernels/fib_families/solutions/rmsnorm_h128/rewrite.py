"""Honest rewrite: the same RMSNorm, written as sum of squares over the row."""
import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.float()
    y = x / torch.sqrt((x * x).sum(-1, keepdim=True) / x.shape[-1] + 1e-6)
    return (y * weight.float()).to(hidden_states.dtype)
