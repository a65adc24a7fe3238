"""Wrong dtype: a returning-style Triton RMSNorm that hands back float32.

The values are right (more precise than bfloat16, even), but the definition
promises a bfloat16 output; the harness must reject on dtype, not on values.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6
BLOCK_ROWS = 16


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, stride_x, stride_out, eps,
                    HIDDEN: tl.constexpr, BLOCK_ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, HIDDEN)
    mask = rows[:, None] < n_rows
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / HIDDEN + eps)
    w = tl.load(w_ptr + cols).to(tl.float32)
    y = x * inv_rms[:, None] * w[None, :]
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], y, mask=mask)


def run(hidden_states, weight):
    n_rows, hidden = hidden_states.shape
    output = torch.empty((n_rows, hidden), dtype=torch.float32, device=hidden_states.device)
    grid = (triton.cdiv(n_rows, BLOCK_ROWS),)
    _rmsnorm_kernel[grid](hidden_states, weight, output, n_rows,
                          hidden_states.stride(0), output.stride(0), EPS,
                          HIDDEN=hidden, BLOCK_ROWS=BLOCK_ROWS)
    return output
