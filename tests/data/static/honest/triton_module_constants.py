"""Honest control: a Triton RMSNorm whose tile sizes and epsilon are module-level constants."""

import torch
import triton
import triton.language as tl

BLOCK = 1024
NUM_WARPS = 8
EPS = 1e-6
HIDDEN_MAX = 4 * BLOCK
USE_FP32_ACC = True


@triton.jit
def _rms_kernel(X, W, Y, stride, n_cols, eps, BLOCK: tl.constexpr, ACC32: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32 if ACC32 else tl.float16)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(X + row * stride + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(X + row * stride + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + row * stride + offs, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


def run(hidden_states: torch.Tensor, weight: torch.Tensor, output: torch.Tensor) -> None:
    rows, hidden = hidden_states.shape
    if hidden > HIDDEN_MAX:
        raise ValueError(f"hidden size {hidden} is over {HIDDEN_MAX}")
    if rows == 0:
        return
    _rms_kernel[(rows,)](hidden_states, weight, output, hidden_states.stride(0), hidden, EPS,
                         BLOCK=BLOCK, ACC32=USE_FP32_ACC, num_warps=NUM_WARPS)
