#include "kernels/aux_loss.h"
#include "kernels/cuda_check.cuh"

namespace moebench {

// One thread per (group, expert): adjacent threads read adjacent columns of a probs row.
__global__ void aux_loss_stats_kernel(GateShape g, int groups, const float* probs, const int* expert, float* density,
                                      float* proxy) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x, gr = blockIdx.y;
  if (e >= g.experts) return;
  const int F = g.experts / g.prototypes, z = e / F, S = g.prototypes * g.k, per_group = g.tokens / groups;
  float p = 0.f, d = 0.f;
  for (int t = gr * per_group; t < (gr + 1) * per_group; ++t) {
    p += probs[size_t(t) * g.experts + e];
    d += expert[size_t(t) * S + size_t(z) * g.k] == e ? 1.f : 0.f;
  }
  density[size_t(gr) * g.experts + e] = d / float(per_group);
  proxy[size_t(gr) * g.experts + e] = p / float(per_group);
}

__global__ void add_group_bias_kernel(int tokens, int experts, int groups, const float* bias, float* x) {
  const size_t n = size_t(tokens) * experts;
  const int per_group = tokens / groups;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int t = int(i / experts), e = int(i % experts);
    x[i] += bias[size_t(t / per_group) * experts + e];
  }
}

void aux_loss_stats_cuda(const GateShape& g, int groups, const float* probs, const std::int32_t* expert,
                         float* density, float* proxy, void* stream) {
  aux_loss_stats_kernel<<<dim3((g.experts + 127) / 128, groups), 128, 0, static_cast<cudaStream_t>(stream)>>>(
      g, groups, probs, expert, density, proxy);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void add_group_bias_cuda(int tokens, int experts, int groups, const float* bias, float* x, void* stream) {
  const size_t n = size_t(tokens) * experts;
  if (n == 0) return;
  const unsigned grid = unsigned(std::min<size_t>((n + 255) / 256, 65535u * 8u));
  add_group_bias_kernel<<<grid, 256, 0, static_cast<cudaStream_t>(stream)>>>(tokens, experts, groups, bias, x);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
