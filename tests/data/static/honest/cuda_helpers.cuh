#pragma once
#include <cuda_fp16.h>

// Warp-level sum used by the reduction kernels.
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffff, v, offset);
  }
  return v;
}

__device__ __forceinline__ float to_float(__half h) { return __half2float(h); }
