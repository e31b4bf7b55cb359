// Error checks for cuBLAS and cuBLASLt calls: a failure becomes moebench::Error with the call,
// the library's message and the place.
#pragma once
#include <string>
#include "kernels/cublas_library.h"
#include "kernels/exec.h"

namespace moebench::detail {
[[noreturn]] inline void cublas_fail(cublasStatus_t s, const char* call, const char* file, int line) {
  throw Error(std::string(call) + " failed: " + cublas().status_string(s) + " (" + file + ":" + std::to_string(line) + ")");
}
}  // namespace moebench::detail

#define MOEBENCH_CUBLAS_CHECK(call)                                                       \
  do {                                                                                    \
    cublasStatus_t moebench_s_ = (call);                                                  \
    if (moebench_s_ != CUBLAS_STATUS_SUCCESS) ::moebench::detail::cublas_fail(moebench_s_, #call, __FILE__, __LINE__); \
  } while (0)
