#include <cmath>
#include <cstring>
#include "kernels/adam.h"

namespace moebench {

void adam_step_cpu(std::size_t n, const AdamStep& a, float* master, float* m, float* v, const float* grad) {
  const float c1 = 1.f - std::pow(a.beta1, float(a.step)), c2 = 1.f - std::pow(a.beta2, float(a.step));
  for (std::size_t i = 0; i < n; ++i) {
    m[i] = a.beta1 * m[i] + (1.f - a.beta1) * grad[i];
    v[i] = a.beta2 * v[i] + (1.f - a.beta2) * grad[i] * grad[i];
    master[i] -= a.lr * ((m[i] / c1) / (std::sqrt(v[i] / c2) + a.eps) + a.weight_decay * master[i]);
  }
}

void adam_step(const Exec& ex, std::size_t n, const AdamStep& a, float* master, float* m, float* v, const void* grad,
               void* weights, DType t) {
  if (ex.backend == Backend::cuda) return adam_step_cuda(n, a, master, m, v, grad, weights, t, ex.stream);
  if (t != DType::f32) throw Error("adam_step: the CPU backend computes in fp32 only");
  run_host(ex, "adam_step", [=] {
    adam_step_cpu(n, a, master, m, v, static_cast<const float*>(grad));
    if (weights != master) std::memcpy(weights, master, n * sizeof(float));
  });
}

#if !MOEBENCH_WITH_CUDA
void adam_step_cuda(std::size_t, const AdamStep&, float*, float*, float*, const void*, void*, DType, void*) {
  cuda_not_built("adam_step");
}
#endif

}  // namespace moebench
