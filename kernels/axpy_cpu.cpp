#include <string>
#include "kernels/axpy.h"

namespace moebench {

void axpy_cpu(std::size_t n, float alpha, const float* x, float* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void axpy(const Exec& ex, std::size_t n, float alpha, const void* x, void* y, DType t) {
  if (ex.backend == Backend::cuda) return axpy_cuda(n, alpha, x, y, t, ex.stream);
  if (t != DType::f32) throw Error("axpy: the CPU backend computes in fp32 only");
  run_host(ex, "axpy", [=] { axpy_cpu(n, alpha, static_cast<const float*>(x), static_cast<float*>(y)); });
}

#if !MOEBENCH_WITH_CUDA
void axpy_cuda(std::size_t, float, const void*, void*, DType, void*) { cuda_not_built("axpy"); }
#endif

}  // namespace moebench
