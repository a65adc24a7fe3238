"""Honest two-file Triton GEMM (DPS): the kernel lives in gemm_kernel.py.

main.py imports it package-relatively, the way FlashInfer-Bench loads a
solution's sources as one package.
"""

import triton

from .gemm_kernel import gemm_kernel

BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 32


def run(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    gemm_kernel[grid](A, B, C, M, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                      C.stride(0), C.stride(1), N=N, K=K,
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
