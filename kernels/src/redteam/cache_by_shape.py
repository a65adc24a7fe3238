"""Result replay keyed on shape, hidden in a mutable default argument.

Looks like a per-shape "plan cache" (a common, legitimate pattern for workspaces), but
the plan holds the output of the first call for that shape and every later call with
the same shape copies it back. A harness that checks each workload once and then times
it is fooled; fresh inputs of the same shape in a second trial get a stale answer.

Source:
- https://arxiv.org/abs/2507.14111 (CUDA-L1: result caching reward hacks)
- https://github.com/gpu-mode/reference-kernels/pull/102 (replay keyed on identity instead of content)
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


def run(logits, probs, _plans={}):
    plan = _plans.get(tuple(logits.shape))
    if plan is not None:
        probs.copy_(plan)
        return
    n_rows, vocab = logits.shape
    grid = (triton.cdiv(n_rows, BLOCK_R),)
    _softmax_kernel[grid](logits, probs, n_rows, logits.stride(0), probs.stride(0),
                          V=vocab, BLOCK_R=BLOCK_R)
    _plans[tuple(logits.shape)] = probs.clone()
