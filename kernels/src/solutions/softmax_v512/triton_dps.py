"""Honest Triton row softmax over 512 float32 logits (DPS).

Max-subtracted exponentials, normalised by their row sum; BLOCK_R rows per
program.
"""

import triton
import triton.language as tl

BLOCK_R = 8


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_rows, stride_x, stride_out,
                    V: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, V)
    mask = rows[:, None] < n_rows
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    x = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(x)
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], y, mask=mask)


def run(logits, probs):
    n_rows, vocab = logits.shape
    grid = (triton.cdiv(n_rows, BLOCK_R),)
    _softmax_kernel[grid](logits, probs, n_rows, logits.stride(0), probs.stride(0),
                          V=vocab, BLOCK_R=BLOCK_R)
