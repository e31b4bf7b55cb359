// y += alpha * x, elementwise (gradient accumulation and plain SGD steps). fp32 arithmetic.
#pragma once
#include <cstddef>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

void axpy_cpu(std::size_t n, float alpha, const float* x, float* y);
void axpy_cuda(std::size_t n, float alpha, const void* x, void* y, DType t, void* stream);
void axpy(const Exec& ex, std::size_t n, float alpha, const void* x, void* y, DType t);

}  // namespace moebench
