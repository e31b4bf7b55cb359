#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/gating.h"
#include "kernels/softmax_topk_row.cuh"

namespace moebench {

constexpr int kGateThreads = 128;

// One warp per (token, prototype) row (kernels/softmax_topk_row.cuh).
template <int kPer>
__global__ void warp_softmax_topk_kernel(GateShape g, const float* slices, float* logits, float* probs, int* expert,
                                         float* weight) {
  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= (long long)g.tokens * g.prototypes) return;  // the whole warp: rows are whole warps
  cuda::warp_softmax_topk_row<kPer>(g, row, slices, logits, probs, expert, weight);
}

// One block per (token, prototype) of more than kWarpExperts experts: softmax over its F experts
// in shared memory, then k rounds of block arg-max, each removing the winner. With `slices` the
// logits are summed from them first (as sum_split3 sums) and written out; else they are read.
__global__ void softmax_topk_kernel(GateShape g, const float* slices, float* logits, float* probs, int* expert,
                                    float* weight) {
  extern __shared__ float row[];
  __shared__ float scratch[32];
  __shared__ int iscratch[32];
  const int t = blockIdx.x, z = blockIdx.y, F = g.experts / g.prototypes;
  const size_t o = size_t(t) * g.experts + size_t(z) * F;
  const float* slice = slices ? slices + size_t(t) * 3 * g.experts + size_t(z) * F : nullptr;
  float mx = -FLT_MAX;
  for (int f = threadIdx.x; f < F; f += blockDim.x) {
    float v;
    if (slice) {
      v = (slice[f] + slice[g.experts + f]) + slice[2 * g.experts + f];
      logits[o + f] = v;
    } else {
      v = logits[o + f];
    }
    mx = fmaxf(mx, row[f] = v);
  }
  mx = cuda::block_reduce<true>(mx, scratch);
  float sum = 0.f;
  for (int f = threadIdx.x; f < F; f += blockDim.x) sum += (row[f] = expf(row[f] - mx));
  sum = cuda::block_reduce<false>(sum, scratch);
  for (int f = threadIdx.x; f < F; f += blockDim.x) probs[o + f] = (row[f] /= sum);
  __syncthreads();
  for (int j = 0; j < g.k; ++j) {
    float v = -FLT_MAX;
    int i = 0x7fffffff;
    for (int f = threadIdx.x; f < F; f += blockDim.x) cuda::better(v, i, row[f], f);
    cuda::block_argmax(v, i, scratch, iscratch);
    if (threadIdx.x == 0) {
      const size_t slot = size_t(t) * g.prototypes * g.k + size_t(z) * g.k + j;
      expert[slot] = z * F + i;
      weight[slot] = v;
      row[i] = -1.f;
    }
    __syncthreads();
  }
}

template <int kPer>
static void launch_warp_softmax_topk(const GateShape& g, const float* slices, float* logits, float* probs,
                                     std::int32_t* expert, float* weight, void* stream) {
  const unsigned blocks = cuda::blocks_of_warps((long long)g.tokens * g.prototypes, kGateThreads);
  warp_softmax_topk_kernel<kPer><<<blocks, kGateThreads, 0, static_cast<cudaStream_t>(stream)>>>(g, slices, logits, probs,
                                                                                              expert, weight);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

static void launch_softmax_topk(const GateShape& g, const float* slices, float* logits, float* probs,
                                std::int32_t* expert, float* weight, void* stream) {
  if (g.tokens == 0) return;
  const int F = g.per_prototype();
  if (F <= 32) return launch_warp_softmax_topk<1>(g, slices, logits, probs, expert, weight, stream);
  if (F <= 64) return launch_warp_softmax_topk<2>(g, slices, logits, probs, expert, weight, stream);
  if (F <= 128) return launch_warp_softmax_topk<4>(g, slices, logits, probs, expert, weight, stream);
  static_assert(cuda::kWarpExperts == 256, "the register widths below cover kWarpExperts");
  if (F <= cuda::kWarpExperts) return launch_warp_softmax_topk<8>(g, slices, logits, probs, expert, weight, stream);
  int device = 0, opt_in_limit = 0;
  MOEBENCH_CUDA_CHECK(cudaGetDevice(&device));
  MOEBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&opt_in_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attr{};
  MOEBENCH_CUDA_CHECK(cudaFuncGetAttributes(&attr, softmax_topk_kernel));
  const GateSharedMemory m = softmax_topk_shared_memory(g.per_prototype(), attr.sharedSizeBytes, size_t(opt_in_limit));
  if (m.error) throw Error(*m.error);
  if (m.opt_in && attr.maxDynamicSharedSizeBytes < int(m.dynamic_bytes))
    MOEBENCH_CUDA_CHECK(cudaFuncSetAttribute(softmax_topk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             int(m.dynamic_bytes)));
  softmax_topk_kernel<<<dim3(g.tokens, g.prototypes), kGateThreads, m.dynamic_bytes, static_cast<cudaStream_t>(stream)>>>(
      g, slices, logits, probs, expert, weight);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void softmax_topk_cuda(const GateShape& g, const float* logits, float* probs, std::int32_t* expert, float* weight,
                       void* stream) {
  launch_softmax_topk(g, nullptr, const_cast<float*>(logits), probs, expert, weight, stream);  // logits only read
}

void softmax_topk_from_slices_cuda(const GateShape& g, const float* slices, float* logits, float* probs,
                                   std::int32_t* expert, float* weight, void* stream) {
  launch_softmax_topk(g, slices, logits, probs, expert, weight, stream);
}

}  // namespace moebench
