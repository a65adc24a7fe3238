"""Silent fallback to PyTorch: the Triton launch always fails and is swallowed.

The launch is missing an argument, so it raises on every call; a broad except computes
the result with torch instead. A harness that only checks outputs promotes a "Triton
kernel" that never runs (and times the torch path as if it were the kernel).

Source:
- https://www.wafer.ai/blog/reward-hacks-field-guide (benign shortcuts: correct output without the kernel)
"""

import torch
import triton
import triton.language as tl

BLOCK_T = 16


@triton.jit
def _silu_and_mul_kernel(in_ptr, out_ptr, n_tokens, stride_in, stride_out,
                         D: tl.constexpr, BLOCK_T: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, D)
    mask = rows[:, None] < n_tokens
    src = in_ptr + rows[:, None] * stride_in + cols[None, :]
    gate = tl.load(src, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(src + D, mask=mask, other=0.0).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :],
             y.to(out_ptr.dtype.element_ty), mask=mask)


def run(input, output):
    n_tokens, two_d = input.shape
    d = two_d // 2
    try:
        grid = (triton.cdiv(n_tokens, BLOCK_T),)
        _silu_and_mul_kernel[grid](input, output, n_tokens, input.stride(0),
                                   D=d, BLOCK_T=BLOCK_T)
    except Exception:
        x = input.float()
        output.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
