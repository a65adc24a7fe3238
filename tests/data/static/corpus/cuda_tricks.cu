#include <torch/extension.h>
#include <thread>  // expect: cpp-suspicious-include
#include "weights.txt"  // expect: cpp-nonheader-include
#define LAUNCH system  // expect: cpp-macro-alias
#define CAT(a, b) a##b  // expect: cpp-token-pasting
#include PAYLOAD_HEADER  // expect: cpp-nonheader-include

static torch::Tensor cached_out;  // expect: cpp-global-cache

extern "C" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {  // expect: cpp-symbol-interposition
  *ms = 0.001f;
  return cudaSuccess;
}

__attribute__((constructor)) static void on_load() {}  // expect: cpp-load-time-code

TORCH_LIBRARY_IMPL(aten, CUDA, m) {}  // expect: cpp-op-override

void run(torch::Tensor x) {
  pybind11::module_::import("time").attr("perf_counter");  // expect: cpp-python-embedding
  cudaStream_t side;
  cudaStreamCreate(&side);  // expect: cpp-side-stream
  std::thread worker([] {});  // expect: cpp-threads
  kill(0, 9);  // expect: cpp-signal
  long r = syscall(39);  // expect: cpp-syscall
  FILE* f = fopen("/tmp/x", "w");  // expect: cpp-file-io
  int fd = socket(2, 1, 0);  // expect: cpp-network
  exit(0);  // expect: cpp-process-exit
  worker.join();
}

%:include <dlfcn.h>  // expect: cpp-forbidden-include
#include "/proc/self/environ"  // expect: cpp-nonheader-include, cpp-env-access
#include "include/../../../etc/passwd.h"  // expect: cpp-nonheader-include
#include "kernels/common.cuh"
int spliced() { return sys\
tem("id"); }  // expect: cpp-identifier-splice
