#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/gating.h"

namespace moebench {

constexpr int kGateThreads = 128;

// One block per (token, prototype): softmax over its F experts in shared memory, then k
// rounds of block arg-max, each removing the winner. With `slices` the logits are summed from
// them first (as sum_split3 sums) and written out; else they are read.
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

__global__ void softmax_backward_kernel(GateShape g, const float* probs, const float* dprobs, float* dlogits) {
  __shared__ float scratch[32];
  const int t = blockIdx.x, z = blockIdx.y, F = g.experts / g.prototypes;
  const size_t o = size_t(t) * g.experts + size_t(z) * F;
  float dot = 0.f;
  for (int f = threadIdx.x; f < F; f += blockDim.x) dot += probs[o + f] * dprobs[o + f];
  dot = cuda::block_reduce<false>(dot, scratch);
  for (int f = threadIdx.x; f < F; f += blockDim.x) dlogits[o + f] = probs[o + f] * (dprobs[o + f] - dot);
}

// One thread per token: its slots name distinct experts, so no two writes collide.
__global__ void scatter_slot_grads_kernel(GateShape g, const int* expert, const float* dweight, float* dprobs) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= g.tokens) return;
  const int S = g.prototypes * g.k;
  for (int s = 0; s < S; ++s) dprobs[size_t(t) * g.experts + expert[size_t(t) * S + s]] += dweight[size_t(t) * S + s];
}

static void launch_softmax_topk(const GateShape& g, const float* slices, float* logits, float* probs,
                                std::int32_t* expert, float* weight, void* stream) {
  if (g.tokens == 0) return;
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

void softmax_backward_cuda(const GateShape& g, const float* probs, const float* dprobs, float* dlogits, void* stream) {
  if (g.tokens == 0) return;
  softmax_backward_kernel<<<dim3(g.tokens, g.prototypes), kGateThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      g, probs, dprobs, dlogits);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void scatter_slot_grads_cuda(const GateShape& g, const std::int32_t* expert, const float* dweight, float* dprobs,
                             void* stream) {
  if (g.tokens == 0) return;
  scatter_slot_grads_kernel<<<(g.tokens + 127) / 128, 128, 0, static_cast<cudaStream_t>(stream)>>>(g, expert, dweight,
                                                                                                     dprobs);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
