#include "kernels/gelu.h"
#include "kernels/gelu_math.h"

namespace moebench {

void gelu_forward_cpu(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = gelu_math::forward(x[i]);
}

void gelu_backward_cpu(const float* x, const float* dy, float* dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_math::derivative(x[i]);
}

static void require_f32(DType t, const char* op) {
  if (t != DType::f32) throw Error(std::string(op) + ": the CPU backend computes in fp32 only, not " + std::string(dtype_name(t)));
}

void gelu_forward(const Exec& ex, const void* x, void* y, std::size_t n, DType t) {
  if (ex.backend == Backend::cuda) return gelu_forward_cuda(x, y, n, t, ex.stream);
  require_f32(t, "gelu_forward");
  run_host(ex, "gelu_forward", [=] { gelu_forward_cpu(static_cast<const float*>(x), static_cast<float*>(y), n); });
}

void gelu_backward(const Exec& ex, const void* x, const void* dy, void* dx, std::size_t n, DType t) {
  if (ex.backend == Backend::cuda) return gelu_backward_cuda(x, dy, dx, n, t, ex.stream);
  require_f32(t, "gelu_backward");
  run_host(ex, "gelu_backward", [=] {
    gelu_backward_cpu(static_cast<const float*>(x), static_cast<const float*>(dy), static_cast<float*>(dx), n);
  });
}

#if !MOEBENCH_WITH_CUDA
void gelu_forward_cuda(const void*, void*, std::size_t, DType, void*) { cuda_not_built("gelu_forward"); }
void gelu_backward_cuda(const void*, const void*, void*, std::size_t, DType, void*) { cuda_not_built("gelu_backward"); }
#endif

}  // namespace moebench
