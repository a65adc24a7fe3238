"""Wrong Triton softmax: normalises each column over the batch, not each row.

The kernel walks columns instead of rows (softmax over dim 0); for a batch of
one every output becomes 1.0. Fails numerically.
"""

import triton
import triton.language as tl

BLOCK_C = 64


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_rows, stride_x, stride_out,
                    BLOCK_B: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    rows = tl.arange(0, BLOCK_B)
    cols = pid * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = rows[:, None] < n_rows
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask,
                other=-float("inf"))
    x = x - tl.max(x, axis=0)[None, :]
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)[None, :]
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], y, mask=mask)


def run(logits, probs):
    n_rows, vocab = logits.shape
    grid = (triton.cdiv(vocab, BLOCK_C),)
    _softmax_kernel[grid](logits, probs, n_rows, logits.stride(0), probs.stride(0),
                          BLOCK_B=triton.next_power_of_2(n_rows), BLOCK_C=BLOCK_C)
