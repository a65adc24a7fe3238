"""Specialised to the workload file's batch sizes; wrong for any other size.

Launch configurations are "tuned" per batch size read off the workload file (1, 7, 32,
64). Any other size falls back to a floor-divided grid that drops the tail rows, so at
batch 37 the last five rows are never written. A harness that only evaluates the sizes
in the workload file promotes it; held-out sizes catch it.

Source:
- https://arxiv.org/abs/2507.14111 (CUDA-L1: exploiting the evaluated problem sizes)
"""

import triton
import triton.language as tl

EPS = 1e-6

# (programs, rows per program) for the benchmark's batch sizes
_TUNED = {1: (1, 1), 7: (1, 8), 32: (2, 16), 64: (4, 16)}


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
    programs, rows = _TUNED.get(n_rows, (max(1, n_rows // 16), 16))
    _rmsnorm_kernel[(programs,)](hidden_states, weight, output, n_rows,
                                 hidden_states.stride(0), output.stride(0), EPS,
                                 HIDDEN=hidden, BLOCK_ROWS=rows)
