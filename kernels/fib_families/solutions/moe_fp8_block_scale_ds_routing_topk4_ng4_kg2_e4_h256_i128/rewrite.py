"""Honest rewrite: block dequantisation by broadcasting, routing with torch.topk and masks,
SwiGLU through torch's silu; experts visited in the same order."""
import torch
import torch.nn.functional as F

BLOCK = 128
TOP_K, N_GROUP, TOPK_GROUP = 4, 4, 2


def _dequant(w, s):
    e, r, c = w.shape
    blocks = w.float().view(e, r // BLOCK, BLOCK, c // BLOCK, BLOCK)
    return (blocks * s.float()[:, :, None, :, None]).view(e, r, c)


@torch.no_grad()
def run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
        gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, local_expert_offset,
        routed_scaling_factor):
    t, h = hidden_states.shape
    e_global = routing_logits.shape[1]
    inter = gemm2_weights.shape[2]
    a = hidden_states.float().view(t, h // BLOCK, BLOCK) * hidden_states_scale.float().t()[:, :, None]
    a = a.reshape(t, h)
    w13 = _dequant(gemm1_weights, gemm1_weights_scale)
    w2 = _dequant(gemm2_weights, gemm2_weights_scale)
    s = torch.sigmoid(routing_logits.float())
    sb = s + routing_bias.float()
    group_scores = sb.view(t, N_GROUP, -1).topk(2, dim=-1).values.sum(-1)
    keep = torch.zeros_like(group_scores).scatter_(1, group_scores.topk(TOPK_GROUP, dim=1).indices, 1.0)
    allowed = keep.repeat_interleave(e_global // N_GROUP, dim=1) > 0
    chosen = sb.masked_fill(~allowed, torch.finfo(torch.float32).min).topk(TOP_K, dim=1).indices
    picked = torch.zeros_like(s).scatter_(1, chosen, 1.0)
    weights = s * picked
    weights = weights / (weights.sum(1, keepdim=True) + 1e-20) * routed_scaling_factor
    out = torch.zeros(t, h)
    for le in range(gemm1_weights.shape[0]):
        ge = int(local_expert_offset) + le
        if not 0 <= ge < e_global:
            continue
        rows = picked[:, ge] > 0
        if not bool(rows.any()):
            continue
        g1 = a[rows] @ w13[le].t()
        act = F.silu(g1[:, inter:]) * g1[:, :inter]
        out[rows] += (act @ w2[le].t()) * weights[rows, ge, None]
    return out.to(torch.bfloat16)
