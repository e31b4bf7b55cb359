#include "kernels/bf16_split.cuh"
#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/gate_grads.h"

namespace moebench {

namespace {
constexpr int kGateGradThreads = 128;  // four warps, four rows a block

// Expert z F + f's dprobs: its slot's gradient (top-k's experts are distinct: one slot at most),
// then the aux loss's bias, each rounded as the separate ops rounded them (no fused multiply-add).
__device__ __forceinline__ float dprob(const GateGradArgs& a, size_t slots, int first, int f, int group) {
  float v = 0.f;
  for (int j = 0; j < a.g.k; ++j)
    if (a.expert[slots + j] == first + f) v += a.dweight[slots + j];
  if (a.density) v = __fadd_rn(v, __fmul_rn(a.aux_scale, a.density[size_t(group) * a.g.experts + first + f]));
  return v;
}

// A warp per (token, prototype) row: the dot of p and dprobs by shuffles, then the row written.
__global__ void gate_logit_grads_kernel(GateGradArgs a, Bf16Parts parts, void* out) {
  const GateShape& g = a.g;
  const int lane = threadIdx.x & 31, F = g.experts / g.prototypes;
  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= (long long)g.tokens * g.prototypes) return;  // the whole warp
  const int t = int(row / g.prototypes), z = int(row % g.prototypes), first = z * F;
  const int group = t / (g.tokens / a.groups);
  const size_t slots = size_t(t) * g.prototypes * g.k + size_t(z) * g.k, o = size_t(t) * g.experts + first;
  float dot = 0.f;
  for (int f = lane; f < F; f += 32) dot += a.probs[o + f] * dprob(a, slots, first, f, group);
  dot = cuda::warp_sum(dot);
  for (int f = lane; f < F; f += 32) {
    const float dl = a.probs[o + f] * (dprob(a, slots, first, f, group) - dot);
    if (parts.count == 0) {
      static_cast<float*>(out)[o + f] = dl;
      continue;
    }
    const cuda::Bf16Triple p = cuda::bf16_parts(dl);
    __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(out) + size_t(t) * parts.count * g.experts + first + f;
#pragma unroll
    for (int s = 0; s < 4; ++s)
      if (s < parts.count) dst[size_t(s) * g.experts] = cuda::bf16_part(p, parts.part[s]);
  }
}
}  // namespace

void gate_logit_grads_cuda(const GateGradArgs& a, Bf16Parts parts, void* out, void* stream) {
  gate_logit_grads_kernel<<<cuda::blocks_of_warps((long long)a.g.tokens * a.g.prototypes, kGateGradThreads), kGateGradThreads, 0,
                            static_cast<cudaStream_t>(stream)>>>(a, parts, out);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
