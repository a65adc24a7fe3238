"""Constant output: every probability set to 1/vocab, no input read at all.

A Triton kernel that only stores 1/512. Each softmax output is a few thousandths, so
against an absolute tolerance of 1e-2 (the common default) almost every element
"matches"; with logits drawn uniformly from [0, 1) every element does. Only a tolerance
that fits float32 (or a matched ratio of 1.0 on peaked rows) rejects it.

Source:
- https://www.wafer.ai/blog/reward-hacks-field-guide (outputs that pass a loose correctness check)
"""

import triton
import triton.language as tl

BLOCK_R = 8


@triton.jit
def _uniform_kernel(out_ptr, n_rows, stride_out, V: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, V)
    y = tl.full((BLOCK_R, V), 1.0 / V, tl.float32)
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], y, mask=rows[:, None] < n_rows)


def run(logits, probs):
    n_rows, vocab = logits.shape
    grid = (triton.cdiv(n_rows, BLOCK_R),)
    _uniform_kernel[grid](probs, n_rows, probs.stride(0), V=vocab, BLOCK_R=BLOCK_R)
