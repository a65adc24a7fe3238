// PLANTED BUG: a thread reads its partner warp's shared slot right after the partner rewrote it, with the __syncthreads() in between missing (racecheck RAW).
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

static cudaStream_t stream_of(const tvm::ffi::TensorView& t) {
  return static_cast<cudaStream_t>(TVMFFIEnvGetStream(t.device().device_type, t.device().device_id));
}

static void check_launch() {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << cudaGetErrorString(err);
}

__global__ void axpy_missing_sync(const float* __restrict__ x, const float* __restrict__ y,
                                  float* __restrict__ z, int n) {
  __shared__ float s[256];
  int t = threadIdx.x;
  int base = blockIdx.x * blockDim.x;
  float v = (base + t < n) ? 2.0f * x[base + t] + y[base + t] : 0.0f;
  s[t] = v;
  __syncthreads();
  s[t] = v;  // second stage rewrites the slot
  // BUG: __syncthreads() missing here
  int p = t ^ 32;  // partner thread in another warp
  if (base + p < n) z[base + p] = s[p];
}

void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y, tvm::ffi::TensorView z) {
  const int n = static_cast<int>(x.size(0));
  if (n == 0) return;
  
  axpy_missing_sync<<<(n + 255) / 256, 256, 0, stream_of(x)>>>(static_cast<const float*>(x.data_ptr()),
      static_cast<const float*>(y.data_ptr()), static_cast<float*>(z.data_ptr()), n);
  check_launch();
  
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
