// PLANTED BUG: reads a scratch buffer from cudaMalloc that nothing ever wrote (initcheck).
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

__global__ void axpy_uninit_read(const float* __restrict__ x, const float* __restrict__ y,
                                 float* __restrict__ z, int n, const float* __restrict__ scratch) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float junk = scratch[i];  // BUG: never initialised
    z[i] = 2.0f * x[i] + y[i] + (junk == 1234.5678f ? 1e-30f : 0.0f);
  }
}

void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y, tvm::ffi::TensorView z) {
  const int n = static_cast<int>(x.size(0));
  if (n == 0) return;
  float* scratch = nullptr;
  if (cudaMalloc(&scratch, n * sizeof(float)) != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "cudaMalloc";
  axpy_uninit_read<<<(n + 255) / 256, 256, 0, stream_of(x)>>>(static_cast<const float*>(x.data_ptr()),
      static_cast<const float*>(y.data_ptr()), static_cast<float*>(z.data_ptr()), n, scratch);
  check_launch();
  cudaStreamSynchronize(stream_of(x));
  cudaFree(scratch);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
