#include "kernels/aux_loss.h"
#include "kernels/cuda_check.cuh"

namespace moebench {

// A block per (kCols experts, group): thread (x, y) sums expert x's column over the group's
// tokens y, y + kLanes, ... (adjacent x read adjacent columns of a probs row), then the lanes'
// partial sums are added in a fixed tree order -- parallel over the tokens, and the same result
// every run. Four experts a block: the paper's 64 experts make 16 blocks of 1024 threads (32
// experts a block made 2, which looped over 256 tokens each).
constexpr int kCols = 4, kLanes = 256;
__global__ void aux_loss_stats_kernel(GateShape g, int groups, const float* probs, const int* expert, float* density,
                                      float* proxy) {
  __shared__ float part_p[kLanes][kCols + 1], part_d[kLanes][kCols + 1];
  const int x = threadIdx.x, lane = threadIdx.y, e = blockIdx.x * kCols + x, gr = blockIdx.y;
  const int F = g.experts / g.prototypes, S = g.prototypes * g.k, per_group = g.tokens / groups;
  float p = 0.f, d = 0.f;
  if (e < g.experts) {
    const int z = e / F;
    for (int t = gr * per_group + lane; t < (gr + 1) * per_group; t += kLanes) {
      p += probs[size_t(t) * g.experts + e];
      d += expert[size_t(t) * S + size_t(z) * g.k] == e ? 1.f : 0.f;
    }
  }
  part_p[lane][x] = p;
  part_d[lane][x] = d;
  __syncthreads();
  for (int half = kLanes / 2; half > 0; half /= 2) {
    if (lane < half) {
      part_p[lane][x] += part_p[lane + half][x];
      part_d[lane][x] += part_d[lane + half][x];
    }
    __syncthreads();
  }
  if (lane == 0 && e < g.experts) {
    density[size_t(gr) * g.experts + e] = part_d[0][x] / float(per_group);
    proxy[size_t(gr) * g.experts + e] = part_p[0][x] / float(per_group);
  }
}

void aux_loss_stats_cuda(const GateShape& g, int groups, const float* probs, const std::int32_t* expert,
                         float* density, float* proxy, void* stream) {
  aux_loss_stats_kernel<<<dim3((g.experts + kCols - 1) / kCols, groups), dim3(kCols, kLanes), 0,
                          static_cast<cudaStream_t>(stream)>>>(
      g, groups, probs, expert, density, proxy);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
