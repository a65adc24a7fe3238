"""Honest control: two Triton kernels launched in sequence (row sums of squares, then scale),
with triton.cdiv, tl.constexpr, .stride(), .contiguous() and a padded scratch buffer viewed
back to the real width (``x.new_empty(...)[:, :n]``)."""

import functools
import math

import torch
import triton
import triton.language as tl

ROWS_PER_PROGRAM = 4


@triton.jit
def _sumsq_kernel(X, S, n_rows, n_cols, stride_x, BLOCK_C: tl.constexpr,
                  ROWS: tl.constexpr):
    pid = tl.program_id(0)
    for r in range(ROWS):
        row = pid * ROWS + r
        if row < n_rows:
            offs = tl.arange(0, BLOCK_C)
            x = tl.load(X + row * stride_x + offs, mask=offs < n_cols, other=0.0)
            x = x.to(tl.float32)
            tl.store(S + row, tl.sum(x * x, axis=0))


@triton.jit
def _scale_kernel(X, W, S, Y, n_cols, stride_x, stride_y, eps, BLOCK_C: tl.constexpr):
    row = tl.program_id(0)
    col_block = tl.program_id(1)
    offs = col_block * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = offs < n_cols
    rstd = 1.0 / tl.sqrt(tl.load(S + row) / n_cols + eps)
    x = tl.load(X + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride_y + offs, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


def _block_for(n: int, cap: int = 4096) -> int:
    return min(cap, triton.next_power_of_2(max(n, 1)))


def _launch(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, eps: float = 1e-6,
            col_block: int = 256) -> None:
    n_rows, n_cols = x.shape
    sums = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    grid1 = (triton.cdiv(n_rows, ROWS_PER_PROGRAM),)
    _sumsq_kernel[grid1](x, sums, n_rows, n_cols, x.stride(0), BLOCK_C=_block_for(n_cols),
                         ROWS=ROWS_PER_PROGRAM)
    grid2 = (n_rows, triton.cdiv(n_cols, col_block))
    _scale_kernel[grid2](x, w, sums, y, n_cols, x.stride(0), y.stride(0), eps,
                         BLOCK_C=col_block)


launch_default = functools.partial(_launch, eps=1e-6)


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = hidden_states.contiguous()
    n_rows, n_cols = x.shape
    padded = int(math.ceil(n_cols / 64) * 64)
    out = x.new_empty((n_rows, padded))[:, :n_cols]  # padded rows, real width
    if n_rows:
        launch_default(x, weight.contiguous(), out)
    return out.contiguous()
