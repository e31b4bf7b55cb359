#include <cmath>
#include "kernels/adam.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

template <class G, class T>
__global__ void adam_step_kernel(size_t n, AdamStep a, float c1, float c2, float* master, float* m, float* v, const G* grad,
                                 T* weights) {
  if (a.step_count) {  // the count a replayed graph has reached
    const float t = float(*a.step_count);
    c1 = 1.f - powf(a.beta1, t);
    c2 = 1.f - powf(a.beta2, t);
  }
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float g = cuda::load(grad, i) * a.grad_scale;
    const float mi = a.beta1 * m[i] + (1.f - a.beta1) * g, vi = a.beta2 * v[i] + (1.f - a.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float w = master[i] - a.lr * ((mi / c1) / (sqrtf(vi / c2) + a.eps) + a.weight_decay * master[i]);
    master[i] = w;
    if (weights) cuda::store(weights, i, w);
  }
}

__global__ void adam_count_step_kernel(std::int32_t* step_count) { ++*step_count; }

void adam_count_step_cuda(std::int32_t* step_count, void* stream) {
  adam_count_step_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(step_count);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void adam_step_cuda(size_t n, const AdamStep& a, float* master, float* m, float* v, const void* grad, DType grad_t,
                    void* weights, DType t, void* stream) {
  if (n == 0) return;
  const float c1 = 1.f - std::pow(a.beta1, float(a.step)), c2 = 1.f - std::pow(a.beta2, float(a.step));
  cuda::dispatch_float(grad_t, "adam_step", [&](auto grad_tag) {
    using G = decltype(grad_tag);
    cuda::dispatch_float(t, "adam_step", [&](auto weight_tag) {
      using T = decltype(weight_tag);
      T* out = weights == master ? nullptr : static_cast<T*>(weights);  // fp32: the master is the model copy
      adam_step_kernel<G, T><<<cuda::grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
          n, a, c1, c2, master, m, v, static_cast<const G*>(grad), out);
    });
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
