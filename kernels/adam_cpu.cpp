#include <cmath>
#include <cstring>
#include <string>
#include <cstdint>
#include "kernels/adam.h"
#include "kernels/convert.h"

namespace moebench {

namespace {
// One value's update, with the bias corrections c1 = 1 - beta1^t and c2 = 1 - beta2^t.
inline void adam_value(const AdamStep& a, float c1, float c2, float grad, float& master, float& m, float& v) {
  const float g = grad * a.grad_scale;
  m = a.beta1 * m + (1.f - a.beta1) * g;
  v = a.beta2 * v + (1.f - a.beta2) * g * g;
  master -= a.lr * ((m / c1) / (std::sqrt(v / c2) + a.eps) + a.weight_decay * master);
}
float bias_correction(float beta, int step) { return 1.f - std::pow(beta, float(step)); }
int step_of(const AdamStep& a) { return a.step_count ? *a.step_count : a.step; }  // read when the update runs
}  // namespace

void adam_step_cpu(std::size_t n, const AdamStep& a, float* master, float* m, float* v, const float* grad) {
  const float c1 = bias_correction(a.beta1, step_of(a)), c2 = bias_correction(a.beta2, step_of(a));
  for (std::size_t i = 0; i < n; ++i) adam_value(a, c1, c2, grad[i], master[i], m[i], v[i]);
}

namespace {
float load(const void* p, DType t, std::size_t i) {
  if (t == DType::f32) return static_cast<const float*>(p)[i];
  return from_bits16(t, static_cast<const std::uint16_t*>(p)[i]);
}
}  // namespace

void adam_step(const Exec& ex, std::size_t n, const AdamStep& a, float* master, float* m, float* v, const void* grad,
               DType grad_t, void* weights, DType t) {
  for (DType d : {grad_t, t})
    if (!is_float(d)) throw Error("adam_step: " + std::string(dtype_name(d)) + " values; allowed: fp32, fp16 and bf16");
  if (t != DType::f32 && weights == master) throw Error("adam_step: 16-bit weights need fp32 masters of their own");
  if (ex.backend == Backend::cuda) return adam_step_cuda(n, a, master, m, v, grad, grad_t, weights, t, ex.stream);
  run_host(ex, "adam_step", [=] {
    // One pass, element by element, as the GPU kernel: widen and scale the gradient, update, round.
    const float c1 = bias_correction(a.beta1, step_of(a)), c2 = bias_correction(a.beta2, step_of(a));
    for (std::size_t i = 0; i < n; ++i) {
      adam_value(a, c1, c2, load(grad, grad_t, i), master[i], m[i], v[i]);
      if (weights == master || !weights) continue;
      if (t == DType::f32)
        static_cast<float*>(weights)[i] = master[i];
      else
        static_cast<std::uint16_t*>(weights)[i] = to_bits16(t, master[i]);
    }
  });
}

void adam_count_step(const Exec& ex, std::int32_t* step_count) {
  if (ex.backend == Backend::cuda) return adam_count_step_cuda(step_count, ex.stream);
  run_host(ex, "adam_count_step", [step_count] { ++*step_count; });
}

#if !MOEBENCH_WITH_CUDA
void adam_count_step_cuda(std::int32_t*, void*) { cuda_not_built("adam_count_step"); }
void adam_step_cuda(std::size_t, const AdamStep&, float*, float*, float*, const void*, DType, void*, DType, void*) {
  cuda_not_built("adam_step");
}
#endif

}  // namespace moebench
