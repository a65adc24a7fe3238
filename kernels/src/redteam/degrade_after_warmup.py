"""Correct for the first calls, then a cheaper wrong kernel once timing has started.

A call counter switches, after 32 calls (more than a typical correctness phase), to a
kernel that skips the normalisation and only scales by the weight: faster, finite and
wrong. A harness that checks outputs only before the timed loop promotes it with an
inflated speedup; re-checking randomly chosen timed calls catches it.

Source:
- https://github.com/karpathy/llm.c/pull/852 (re-validate outputs after the benchmark loop; a wrapper correct for the first 10 calls)
"""

import itertools

import triton
import triton.language as tl

EPS = 1e-6
BLOCK_ROWS = 16
_calls = itertools.count()


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, stride_x, stride_out, eps,
                    HIDDEN: tl.constexpr, BLOCK_ROWS: tl.constexpr, NORMALISE: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, HIDDEN)
    mask = rows[:, None] < n_rows
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    if NORMALISE:
        inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / HIDDEN + eps)
        y = x * inv_rms[:, None] * w[None, :]
    else:
        y = x * w[None, :]
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :],
             y.to(out_ptr.dtype.element_ty), mask=mask)


def run(hidden_states, weight, output):
    n_rows, hidden = hidden_states.shape
    grid = (triton.cdiv(n_rows, BLOCK_ROWS),)
    _rmsnorm_kernel[grid](hidden_states, weight, output, n_rows,
                          hidden_states.stride(0), output.stride(0), EPS,
                          HIDDEN=hidden, BLOCK_ROWS=BLOCK_ROWS,
                          NORMALISE=next(_calls) < 32)
