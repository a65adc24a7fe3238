"""Wrong Triton GEMM: reads B as if it were stored [K, N].

The wrapper passes B's strides in the wrong order, so the kernel multiplies by
a scrambled reinterpretation of B instead of B^T. Fails numerically.
"""

import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 32


@triton.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, stride_am, stride_ak, stride_bn, stride_bk,
                stride_cm, stride_cn, N: tl.constexpr, K: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k0 + offs_k)[None, :] * stride_ak,
                    mask=offs_m[:, None] < M, other=0.0)
        b = tl.load(b_ptr + offs_n[None, :] * stride_bn + (k0 + offs_k)[:, None] * stride_bk)
        acc += tl.dot(a, b)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=offs_m[:, None] < M)


def run(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    gemm_kernel[grid](A, B, C, M, A.stride(0), A.stride(1), B.stride(1), N,
                      C.stride(0), C.stride(1), N=N, K=K,
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
