#include <string>
#include "kernels/axpy.h"
#include "kernels/host_widen.h"

namespace moebench {

void axpy_cpu(std::size_t n, float alpha, const float* x, float* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void axpy(const Exec& ex, std::size_t n, float alpha, const void* x, void* y, DType t) {
  if (ex.backend == Backend::cuda) return axpy_cuda(n, alpha, x, y, t, ex.stream);
  run_host(ex, "axpy", [=] {
    WidenedView in(x, t, n, true), out(y, t, n, true);
    axpy_cpu(n, alpha, in.data(), out.data());
    out.narrow();
  });
}

#if !MOEBENCH_WITH_CUDA
void axpy_cuda(std::size_t, float, const void*, void*, DType, void*) { cuda_not_built("axpy"); }
#endif

}  // namespace moebench
