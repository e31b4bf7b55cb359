// Error checks for CUDA runtime and cuBLAS calls: a failure becomes moebench::Error with
// the call, the library's message and the place.
#pragma once
#include "kernels/cublas_library.h"
#include <cuda_runtime.h>
#include <string>
#include "kernels/exec.h"

namespace moebench::detail {
[[noreturn]] inline void cuda_fail(cudaError_t e, const char* call, const char* file, int line) {
  throw Error(std::string(call) + " failed: " + cudaGetErrorString(e) + " (" + file + ":" + std::to_string(line) + ")");
}
[[noreturn]] inline void cublas_fail(cublasStatus_t s, const char* call, const char* file, int line) {
  throw Error(std::string(call) + " failed: " + cublas().status_string(s) + " (" + file + ":" + std::to_string(line) + ")");
}
}  // namespace moebench::detail

#define MOEBENCH_CUDA_CHECK(call)                                                         \
  do {                                                                                    \
    cudaError_t moebench_e_ = (call);                                                     \
    if (moebench_e_ != cudaSuccess) ::moebench::detail::cuda_fail(moebench_e_, #call, __FILE__, __LINE__); \
  } while (0)
#define MOEBENCH_CUBLAS_CHECK(call)                                                       \
  do {                                                                                    \
    cublasStatus_t moebench_s_ = (call);                                                  \
    if (moebench_s_ != CUBLAS_STATUS_SUCCESS) ::moebench::detail::cublas_fail(moebench_s_, #call, __FILE__, __LINE__); \
  } while (0)
// After a kernel launch: launch-configuration errors show up here.
#define MOEBENCH_CUDA_LAUNCH_CHECK() MOEBENCH_CUDA_CHECK(cudaGetLastError())
