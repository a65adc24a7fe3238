// PLANTED BUG: 8 warps write different values to the same 32 shared slots with no barrier between them (racecheck WAW).
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

__global__ void axpy_smem_race(const float* __restrict__ x, const float* __restrict__ y,
                               float* __restrict__ z, int n) {
  __shared__ float s[256];
  __shared__ float scratch[32];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  scratch[t & 31] = static_cast<float>(t);  // BUG: every warp writes the same 32 slots
  s[t] = (i < n) ? 2.0f * x[i] + y[i] : 0.0f;
  __syncthreads();
  if (i < n) z[i] = s[t] + (scratch[t & 31] == -1.0f ? 1e-30f : 0.0f);
}

void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y, tvm::ffi::TensorView z) {
  const int n = static_cast<int>(x.size(0));
  if (n == 0) return;
  
  axpy_smem_race<<<(n + 255) / 256, 256, 0, stream_of(x)>>>(static_cast<const float*>(x.data_ptr()),
      static_cast<const float*>(y.data_ptr()), static_cast<float*>(z.data_ptr()), n);
  check_launch();
  
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
