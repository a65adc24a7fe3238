"""Honest Triton RMSNorm, destination-passing style.

Each program normalises BLOCK_ROWS rows of 128 elements: the sum of squares is
accumulated in float32, the result is scaled by the weight and cast back to the
output dtype. Torch is used only to read shapes and strides.
"""

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
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :],
             y.to(out_ptr.dtype.element_ty), mask=mask)


def run(hidden_states, weight, output):
    n_rows, hidden = hidden_states.shape
    assert hidden == 128 and hidden_states.stride(1) == 1 and output.stride(1) == 1
    grid = (triton.cdiv(n_rows, BLOCK_ROWS),)
    _rmsnorm_kernel[grid](hidden_states, weight, output, n_rows,
                          hidden_states.stride(0), output.stride(0), EPS,
                          HIDDEN=hidden, BLOCK_ROWS=BLOCK_ROWS)
