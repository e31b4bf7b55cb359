#include <algorithm>
#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/looped_gating.h"

namespace moebench {
namespace {

constexpr int kPrototypeRowThreads = 128;
constexpr int kLoopedGatingThreads = 256;

unsigned blocks_for(std::size_t n) { return unsigned((n + kLoopedGatingThreads - 1) / kLoopedGatingThreads); }
// For grid-stride kernels: enough blocks to fill the GPU, not one per element.
unsigned strided_blocks_for(std::size_t n) { return unsigned(std::min<std::size_t>(blocks_for(n), 65535u * 8)); }

// One block per (token, prototype).
__global__ void prototype_softmax_kernel(GateShape g, const float* logits, float* probs) {
  __shared__ float scratch[32];
  const int t = blockIdx.x, z = blockIdx.y, F = g.experts / g.prototypes;
  const size_t o = size_t(t) * g.experts + size_t(z) * F;
  float mx = -FLT_MAX;
  for (int f = threadIdx.x; f < F; f += blockDim.x) mx = fmaxf(mx, logits[o + f]);
  mx = cuda::block_reduce<true>(mx, scratch);
  float sum = 0.f;
  for (int f = threadIdx.x; f < F; f += blockDim.x) sum += expf(logits[o + f] - mx);
  sum = cuda::block_reduce<false>(sum, scratch);
  for (int f = threadIdx.x; f < F; f += blockDim.x) probs[o + f] = expf(logits[o + f] - mx) / sum;
}

// One block per (token, prototype): block arg-max, then every thread writes its part of the
// one-hot row.
__global__ void argmax_round_kernel(GateShape g, int round, const float* probs, float* remaining, int* expert,
                                    float* weight, float* one_hot) {
  __shared__ float scratch[32];
  __shared__ int iscratch[32];
  const int t = blockIdx.x, z = blockIdx.y, F = g.experts / g.prototypes;
  const size_t o = size_t(t) * g.experts + size_t(z) * F;
  float v = -FLT_MAX;
  int best = 0x7fffffff;
  for (int f = threadIdx.x; f < F; f += blockDim.x) cuda::better(v, best, remaining[o + f], f);
  cuda::block_argmax(v, best, scratch, iscratch);
  for (int f = threadIdx.x; f < F; f += blockDim.x) one_hot[o + f] = f == best ? 1.f : 0.f;
  if (threadIdx.x == 0) {
    const size_t slot = size_t(t) * g.prototypes * g.k + size_t(z) * g.k + round;
    expert[slot] = z * F + best;
    weight[slot] = probs[o + best];
    remaining[o + best] = -1.f;
  }
}

// One thread per (group, expert) walks the group's tokens: neighbouring threads read
// neighbouring experts of a token row (coalesced).
__global__ void cumsum_columns_kernel(CapacityShape c, const float* one_hot, int* routed, int* kept,
                                      int* position_dense) {
  const int E = c.gate.experts, per_group = c.gate.tokens / c.groups;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= c.groups * E) return;
  const int gr = i / E, e = i % E;
  int running = routed[i];
  for (int t = gr * per_group; t < (gr + 1) * per_group; ++t) {
    position_dense[size_t(t) * E + e] = running;
    running += one_hot[size_t(t) * E + e] != 0.f;
  }
  routed[i] = running;
  kept[i] = min(running, c.capacity);
}

// One thread per (token, prototype): the round's slot reads its position.
__global__ void slot_positions_kernel(CapacityShape c, int round, const int* position_dense, const int* expert,
                                      int* position) {
  const GateShape g = c.gate;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= g.tokens * g.prototypes) return;
  const int t = i / g.prototypes, z = i % g.prototypes;
  const size_t slot = size_t(t) * g.prototypes * g.k + size_t(z) * g.k + round;
  const int p = position_dense[size_t(t) * g.experts + expert[slot]];
  position[slot] = p < c.capacity ? p : -1;
}

// One thread per element of [T, E, C] (grid-stride).
__global__ void combine_round_kernel(CapacityShape c, int round, const int* expert, const int* position,
                                     const float* weight, float* combine, float* dispatch) {
  const GateShape g = c.gate;
  const int E = g.experts, C = c.capacity, F = E / g.prototypes, S = g.prototypes * g.k;
  const size_t n = size_t(g.tokens) * E * C;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t t = i / (size_t(E) * C);
    const int e = int((i / C) % E), k = int(i % C);
    const size_t slot = t * S + size_t(e / F) * g.k + round;
    const float add = expert[slot] == e && position[slot] == k ? weight[slot] : 0.f;
    const float v = combine[i] + add;
    combine[i] = v;
    dispatch[i] = v != 0.f ? 1.f : 0.f;
  }
}

__global__ void gather_slot_grads_kernel(CapacityShape c, const int* expert, const int* position, const float* dcombine,
                                         float* dweight) {
  const GateShape g = c.gate;
  const int S = g.prototypes * g.k;
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(g.tokens) * S) return;
  const size_t t = i / S;
  dweight[i] = position[i] >= 0 ? dcombine[(t * g.experts + expert[i]) * c.capacity + position[i]] : 0.f;
}

}  // namespace

void prototype_softmax_cuda(const GateShape& g, const float* logits, float* probs, void* stream) {
  if (g.tokens == 0) return;
  prototype_softmax_kernel<<<dim3(g.tokens, g.prototypes), kPrototypeRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      g, logits, probs);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void argmax_round_cuda(const GateShape& g, int round, const float* probs, float* remaining, std::int32_t* expert,
                       float* weight, float* one_hot, void* stream) {
  if (g.tokens == 0) return;
  argmax_round_kernel<<<dim3(g.tokens, g.prototypes), kPrototypeRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      g, round, probs, remaining, expert, weight, one_hot);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void cumsum_positions_round_cuda(const CapacityShape& c, int round, const float* one_hot, std::int32_t* routed,
                                 std::int32_t* kept, std::int32_t* position_dense, const std::int32_t* expert,
                                 std::int32_t* position, void* stream) {
  if (c.gate.tokens == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const std::size_t columns = std::size_t(c.groups) * c.gate.experts;
  cumsum_columns_kernel<<<blocks_for(columns), kLoopedGatingThreads, 0, s>>>(c, one_hot, routed, kept, position_dense);
  MOEBENCH_CUDA_LAUNCH_CHECK();
  const std::size_t rows = std::size_t(c.gate.tokens) * c.gate.prototypes;
  slot_positions_kernel<<<blocks_for(rows), kLoopedGatingThreads, 0, s>>>(c, round, position_dense, expert, position);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void combine_round_cuda(const CapacityShape& c, int round, const std::int32_t* expert, const std::int32_t* position,
                        const float* weight, float* combine, float* dispatch, void* stream) {
  const std::size_t n = std::size_t(c.gate.tokens) * c.gate.experts * c.capacity;
  if (n == 0) return;
  combine_round_kernel<<<strided_blocks_for(n), kLoopedGatingThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      c, round, expert, position, weight, combine, dispatch);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void gather_slot_grads_cuda(const CapacityShape& c, const std::int32_t* expert, const std::int32_t* position,
                            const float* dcombine, float* dweight, void* stream) {
  const std::size_t n = std::size_t(c.gate.tokens) * c.gate.slots();
  if (n == 0) return;
  gather_slot_grads_kernel<<<blocks_for(n), kLoopedGatingThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      c, expert, position, dcombine, dweight);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
