"""Result replay keyed on the inputs' data_ptr().

The first call for a pair of input addresses computes honestly and keeps a copy of C;
later calls with the same addresses copy the saved result back. A harness that times
repeated calls on the same input tensors measures a memcpy. With fresh values at a
recycled address the replay is stale (wrong output); with fresh addresses it never hits.

Source:
- https://github.com/gpu-mode/kernelbot/pull/501 (result replay keyed on data_ptr in the timed loop)
- https://arxiv.org/abs/2507.14111 (CUDA-L1: caching results by input memory address)
"""

import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 32

_RESULTS = {}


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
    key = (A.data_ptr(), B.data_ptr(), A.shape[0])
    saved = _RESULTS.get(key)
    if saved is not None:
        C.copy_(saved)
        return
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    gemm_kernel[grid](A, B, C, M, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                      C.stride(0), C.stride(1), N=N, K=K,
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    _RESULTS[key] = C.clone()
