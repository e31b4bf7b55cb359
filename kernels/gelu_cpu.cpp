#include "kernels/gelu.h"
#include "kernels/gelu_math.h"
#include "kernels/host_widen.h"

namespace moebench {

void gelu_forward_cpu(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = gelu_math::forward(x[i]);
}

void gelu_backward_cpu(const float* x, const float* dy, float* dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_math::derivative(x[i]);
}

void gelu_forward(const Exec& ex, const void* x, void* y, std::size_t n, DType t) {
  if (ex.backend == Backend::cuda) return gelu_forward_cuda(x, y, n, t, ex.stream);
  run_host(ex, "gelu_forward", [=] {
    WidenedView in(x, t, n, true), out(y, t, n, false);
    gelu_forward_cpu(in.data(), out.data(), n);
    out.narrow();
  });
}

void gelu_backward(const Exec& ex, const void* x, const void* dy, void* dx, std::size_t n, DType t) {
  if (ex.backend == Backend::cuda) return gelu_backward_cuda(x, dy, dx, n, t, ex.stream);
  run_host(ex, "gelu_backward", [=] {
    WidenedView in(x, t, n, true), grad(dy, t, n, true), out(dx, t, n, false);
    gelu_backward_cpu(in.data(), grad.data(), out.data(), n);
    out.narrow();
  });
}

#if !MOEBENCH_WITH_CUDA
void gelu_forward_cuda(const void*, void*, std::size_t, DType, void*) { cuda_not_built("gelu_forward"); }
void gelu_backward_cuda(const void*, const void*, void*, std::size_t, DType, void*) { cuda_not_built("gelu_backward"); }
#endif

}  // namespace moebench
