// Error checks for CUDA runtime calls: a failure becomes moebench::Error with the call, the
// runtime's message and the place. cuBLAS's are in cublas_check.h, apart, so that a kernel's file
// does not parse cuBLAS's headers.
#pragma once
#include <cuda_runtime.h>
#include <string>
#include "kernels/exec.h"

namespace moebench::detail {
[[noreturn]] inline void cuda_fail(cudaError_t e, const char* call, const char* file, int line) {
  throw Error(std::string(call) + " failed: " + cudaGetErrorString(e) + " (" + file + ":" + std::to_string(line) + ")");
}
}  // namespace moebench::detail

#define MOEBENCH_CUDA_CHECK(call)                                                         \
  do {                                                                                    \
    cudaError_t moebench_e_ = (call);                                                     \
    if (moebench_e_ != cudaSuccess) ::moebench::detail::cuda_fail(moebench_e_, #call, __FILE__, __LINE__); \
  } while (0)
// After a kernel launch: launch-configuration errors show up here.
#define MOEBENCH_CUDA_LAUNCH_CHECK() MOEBENCH_CUDA_CHECK(cudaGetLastError())
