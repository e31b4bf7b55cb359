#include <cmath>
#include <cstring>
#include <string>
#include <vector>
#include "kernels/adam.h"
#include "kernels/convert.h"

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
  if (!is_float(t)) throw Error("adam_step: " + std::string(dtype_name(t)) + " weights; allowed: fp32, fp16 and bf16");
  if (t != DType::f32 && weights == master) throw Error("adam_step: 16-bit weights need fp32 masters of their own");
  run_host(ex, "adam_step", [=] {
    if (t == DType::f32) {
      adam_step_cpu(n, a, master, m, v, static_cast<const float*>(grad));
      if (weights != master) std::memcpy(weights, master, n * sizeof(float));
      return;
    }
    std::vector<float> g(n);  // the 16-bit gradient widened; the update in fp32, the weights rounded
    convert_cpu(grad, t, g.data(), DType::f32, n);
    adam_step_cpu(n, a, master, m, v, g.data());
    convert_cpu(master, DType::f32, weights, t, n);
  });
}

#if !MOEBENCH_WITH_CUDA
void adam_step_cuda(std::size_t, const AdamStep&, float*, float*, float*, const void*, void*, DType, void*) {
  cuda_not_built("adam_step");
}
#endif

}  // namespace moebench
