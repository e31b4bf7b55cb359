#include <cmath>
#include "kernels/adam.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

namespace {

// The bias corrections of the count a replayed graph has reached, else the host's.
__device__ __forceinline__ void bias_corrections(const AdamStep& a, float& c1, float& c2) {
  if (!a.step_count) return;
  const float t = float(*a.step_count);
  c1 = 1.f - powf(a.beta1, t);
  c2 = 1.f - powf(a.beta2, t);
}

// One element's update, in the order the CPU computes it; returns the new master value.
__device__ __forceinline__ float adam_update(const AdamStep& a, float c1, float c2, float grad, float& master, float& m,
                                             float& v) {
  const float g = grad * a.grad_scale;
  m = a.beta1 * m + (1.f - a.beta1) * g;
  v = a.beta2 * v + (1.f - a.beta2) * g * g;
  master = master - a.lr * ((m / c1) / (sqrtf(v / c2) + a.eps) + a.weight_decay * master);
  return master;
}

template <class G, class T>
__global__ void adam_step_kernel(size_t n, AdamStep a, float c1, float c2, float* master, float* m, float* v, const G* grad,
                                 T* weights) {
  bias_corrections(a, c1, c2);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float w = master[i], mi = m[i], vi = v[i];
    adam_update(a, c1, c2, cuda::load(grad, i), w, mi, vi);
    master[i] = w;
    m[i] = mi;
    v[i] = vi;
    if (weights) cuda::store(weights, i, w);
  }
}

// Four elements per thread: the update is memory-bound (26 bytes a 16-bit parameter), and one
// 16-byte access per array instead of four keeps more bytes in flight. The same arithmetic as
// the kernel above, element for element.
template <class G, class T>
__global__ void adam_step4_kernel(size_t quads, AdamStep a, float c1, float c2, float* master, float* m, float* v,
                                  const G* grad, T* weights) {
  bias_corrections(a, c1, c2);
  for (size_t q = blockIdx.x * size_t(blockDim.x) + threadIdx.x; q < quads; q += size_t(gridDim.x) * blockDim.x) {
    const size_t i = 4 * q;
    float g[4], w[4], mi[4], vi[4];
    cuda::load4(grad, i, g);
    cuda::load4(master, i, w);
    cuda::load4(m, i, mi);
    cuda::load4(v, i, vi);
    for (int k = 0; k < 4; ++k) adam_update(a, c1, c2, g[k], w[k], mi[k], vi[k]);
    cuda::store4(master, i, w);
    cuda::store4(m, i, mi);
    cuda::store4(v, i, vi);
    if (weights) cuda::store4(weights, i, w);
  }
}

__global__ void adam_count_step_kernel(std::int32_t* step_count) { ++*step_count; }

}  // namespace

void adam_count_step_cuda(std::int32_t* step_count, void* stream) {
  adam_count_step_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(step_count);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void adam_step_cuda(size_t n, const AdamStep& a, float* master, float* m, float* v, const void* grad, DType grad_t,
                    void* weights, DType t, void* stream) {
  if (n == 0) return;
  const float c1 = 1.f - std::pow(a.beta1, float(a.step)), c2 = 1.f - std::pow(a.beta2, float(a.step));
  const auto st = static_cast<cudaStream_t>(stream);
  cuda::dispatch_float(grad_t, "adam_step", [&](auto grad_tag) {
    using G = decltype(grad_tag);
    cuda::dispatch_float(t, "adam_step", [&](auto weight_tag) {
      using T = decltype(weight_tag);
      const G* g = static_cast<const G*>(grad);
      T* out = weights == master ? nullptr : static_cast<T*>(weights);  // fp32: the master is the model copy
      // Four at a time where every array allows it; the last n % 4 (or all of a misaligned
      // tensor) one at a time.
      const bool by_four = cuda::aligned4(master) && cuda::aligned4(m) && cuda::aligned4(v) && cuda::aligned4(g) &&
                           (!out || cuda::aligned4(out));
      const size_t quads = by_four ? n / 4 : 0, done = 4 * quads;
      if (quads)
        adam_step4_kernel<G, T><<<cuda::grid_for(quads, 256), 256, 0, st>>>(quads, a, c1, c2, master, m, v, g, out);
      if (done < n)
        adam_step_kernel<G, T><<<cuda::grid_for(n - done, 256), 256, 0, st>>>(
            n - done, a, c1, c2, master + done, m + done, v + done, g + done, out ? out + done : nullptr);
    });
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
