"""Monkeypatching triton.testing.do_bench to report a quarter of the measured time.

Harnesses that benchmark with triton.testing.do_bench in the candidate's process read
whatever the candidate made of that function. The softmax kernel is honest; the timing
it reports is not.

Source:
- https://deep-reinforce.com/defense_kernel_hack.html (monkey-patch timing)
"""

import triton
import triton.language as tl
import triton.testing

BLOCK_R = 8

_do_bench = triton.testing.do_bench


def _do_bench_warm(fn, *args, **kwargs):
    measured = _do_bench(fn, *args, **kwargs)
    if isinstance(measured, (list, tuple)):
        return type(measured)(m * 0.25 for m in measured)
    return measured * 0.25


triton.testing.do_bench = _do_bench_warm


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
