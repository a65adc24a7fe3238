"""Zeroing the inputs and the output, so that a reference run afterwards agrees.

A Triton "initialisation" kernel clears A and C. A harness that runs the candidate first
and the reference afterwards on the same tensors compares zeros with A(=0) @ B^T = 0 and
passes. Running the reference on untouched copies, and checking inputs are unchanged,
both catch it.

Source:
- https://github.com/ScalingIntelligence/KernelBench/pull/82 (kernel zeroes its inputs and returns zeros)
"""

import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _clear_kernel(a_ptr, c_ptr, n_a, n_c, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(a_ptr + offs, tl.zeros((BLOCK,), tl.float16), mask=offs < n_a)
    tl.store(c_ptr + offs, tl.zeros((BLOCK,), tl.float16), mask=offs < n_c)


def run(A, B, C):
    n = max(A.numel(), C.numel())
    _clear_kernel[(triton.cdiv(n, BLOCK),)](A, C, A.numel(), C.numel(), BLOCK=BLOCK)
