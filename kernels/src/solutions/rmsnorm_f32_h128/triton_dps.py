"""Honest Triton RMSNorm for float32 with epsilon as a scalar input (DPS).

Same kernel shape as the bfloat16 one; eps arrives as a Python float and is
passed straight to the kernel.
"""

import triton
import triton.language as tl

BLOCK_ROWS = 16


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, stride_x, stride_out, eps,
                    HIDDEN: tl.constexpr, BLOCK_ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, HIDDEN)
    mask = rows[:, None] < n_rows
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / HIDDEN + eps)
    w = tl.load(w_ptr + cols)
    y = x * inv_rms[:, None] * w[None, :]
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], y, mask=mask)


def run(hidden_states, weight, eps, output):
    n_rows, hidden = hidden_states.shape
    grid = (triton.cdiv(n_rows, BLOCK_ROWS),)
    _rmsnorm_kernel[grid](hidden_states, weight, output, n_rows,
                          hidden_states.stride(0), output.stride(0), float(eps),
                          HIDDEN=hidden, BLOCK_ROWS=BLOCK_ROWS)
