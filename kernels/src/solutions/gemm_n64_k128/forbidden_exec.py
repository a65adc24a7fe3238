"""Forbidden: builds its launcher from a string template with exec().

The kernel and the arithmetic are honest; exec of generated source (bandit
B102) must be rejected statically whatever the string holds.
"""

import triton
import triton.language as tl

_LAUNCHER = '''
def launch(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, {bm}), triton.cdiv(N, {bn}))
    gemm_kernel[grid](A, B, C, M, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                      C.stride(0), C.stride(1), N=N, K=K,
                      BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk})
'''


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


exec(_LAUNCHER.format(bm=32, bn=64, bk=32))


def run(A, B, C):
    launch(A, B, C)  # noqa: F821
