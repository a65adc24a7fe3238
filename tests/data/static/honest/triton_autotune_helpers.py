"""Honest control: @triton.autotune over configs built with itertools.product, a heuristics
lambda, helpers with default arguments, a device query, and the version-compatibility import
idiom (one import falling back to another)."""

import itertools

import torch
import triton
import triton.language as tl

try:
    from triton.language.extra import libdevice
except ImportError:  # older Triton
    from triton.language import math as libdevice

CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w, num_stages=s)
           for b, w, s in itertools.product((256, 512), (4, 8), (1, 2))]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def _silu_kernel(X, Y, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(X + offs).to(tl.float32)
        tl.store(Y + offs, (x / (1.0 + libdevice.exp(-x))).to(Y.dtype.element_ty))
    else:
        mask = offs < n
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + offs, (x / (1.0 + libdevice.exp(-x))).to(Y.dtype.element_ty), mask=mask)


def _grid(meta: dict, n: int = 0) -> tuple[int]:
    return (triton.cdiv(n, meta["BLOCK"]),)


def _check(x: torch.Tensor, y: torch.Tensor, *, min_major: int = 7) -> None:
    if x.is_cuda and torch.cuda.get_device_capability(x.device)[0] < min_major:
        raise RuntimeError("needs compute capability 7.0 or newer")
    if x.shape != y.shape or not x.is_contiguous():
        raise ValueError("x and y must be contiguous and of one shape")


def run(x: torch.Tensor, y: torch.Tensor) -> None:
    _check(x, y)
    n = x.numel()
    if n:
        _silu_kernel[lambda meta: _grid(meta, n)](x, y, n)
