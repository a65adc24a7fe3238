"""Honest plain-PyTorch RMSNorm (language python), returning its output.

The baseline a Triton kernel has to beat: no custom kernel at all.
"""

import torch


@torch.no_grad()
def rmsnorm(hidden_states, weight, eps):
    variance = hidden_states.pow(2).mean(dim=-1, keepdim=True)
    return hidden_states * torch.rsqrt(variance + eps) * weight
