// One (token, prototype) row of softmax and top-k on one warp (kernels/gating.h): the gate's own
// kernel (gating_cuda.cu) and the routing's one-pass kernel (routing_cuda.cu) run it.
#pragma once
#include <cfloat>
#include "kernels/block_reduce.cuh"
#include "kernels/gating.h"

namespace moebench::cuda {

// Rows of at most this many experts (per prototype) take a warp each, their values in registers;
// wider rows take a block, whose 5 + 2k barriers per token made it the gate's slowest kernel at
// the paper's 64 experts (results/cuda/targets/*/moe/kernels_local.csv).
constexpr int kWarpExperts = 256;

// Row `row` = t * Z + z of F <= 32 * kPer experts: lane l holds experts l, l + 32, ...; shuffles
// reduce, with no shared memory and no barrier. The same arithmetic as the block kernel (sums in
// another order), the same arg-max rule: larger value, then lower index. With `slices` the logits
// are summed from them ((s0 + s1) + s2, as sum_split3 sums) and written out; else they are read.
template <int kPer>
__device__ __forceinline__ void warp_softmax_topk_row(const GateShape& g, long long row, const float* slices,
                                                      float* logits, float* probs, int* expert, float* weight) {
  const int lane = threadIdx.x & 31, F = g.experts / g.prototypes;
  const int t = int(row / g.prototypes), z = int(row % g.prototypes);
  const size_t o = size_t(t) * g.experts + size_t(z) * F;
  const float* slice = slices ? slices + size_t(t) * 3 * g.experts + size_t(z) * F : nullptr;
  float v[kPer];
  float mx = -FLT_MAX;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int f = lane + 32 * i;
    v[i] = -FLT_MAX;
    if (f < F) {
      if (slice) {
        v[i] = (slice[f] + slice[g.experts + f]) + slice[2 * g.experts + f];
        logits[o + f] = v[i];
      } else {
        v[i] = logits[o + f];
      }
      mx = fmaxf(mx, v[i]);
    }
  }
  mx = warp_max(mx);
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (lane + 32 * i < F) sum += (v[i] = expf(v[i] - mx));
  sum = warp_sum(sum);
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (lane + 32 * i < F) probs[o + lane + 32 * i] = (v[i] /= sum);
  for (int j = 0; j < g.k; ++j) {
    float best = -FLT_MAX;
    int at = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (lane + 32 * i < F) better(best, at, v[i], lane + 32 * i);
    // A total order, so the butterfly leaves every lane with the same winner.
    for (int d = 16; d > 0; d >>= 1)
      better(best, at, __shfl_xor_sync(0xffffffffu, best, d), __shfl_xor_sync(0xffffffffu, at, d));
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (lane + 32 * i == at) v[i] = -1.f;  // taken: below every probability
    if (lane == 0) {
      const size_t slot = size_t(t) * g.prototypes * g.k + size_t(z) * g.k + j;
      expert[slot] = z * F + at;
      weight[slot] = best;
    }
  }
}

}  // namespace moebench::cuda
