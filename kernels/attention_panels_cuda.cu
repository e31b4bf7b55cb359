#include <cfloat>
#include <cstddef>
#include "kernels/attention_panels.h"
#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

namespace {
constexpr int kPanelThreads = 128;

__device__ __forceinline__ int visible(const AttentionPanel& p, int i) {
  return min(max(p.row0 + i - p.col0 + 1, 0), p.cols);
}

// One block per (head, panel row).
template <class T>
__global__ void panel_softmax_forward_kernel(AttentionPanel p, T* scores, float* stats) {
  __shared__ float scratch[32];
  const int h = int(blockIdx.x / unsigned(p.rows)), i = int(blockIdx.x % unsigned(p.rows));
  const size_t base = size_t(blockIdx.x) * p.cols;
  const int n = visible(p, i);
  float mx = -FLT_MAX;
  for (int j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, p.scale * cuda::load(scores, base + j));
  mx = cuda::block_reduce<true>(mx, scratch);
  float sum = 0;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += __expf(p.scale * cuda::load(scores, base + j) - mx);
  const float lse = mx + __logf(cuda::block_reduce<false>(sum, scratch));
  for (int j = threadIdx.x; j < p.cols; j += blockDim.x)
    cuda::store(scores, base + j, j < n ? __expf(p.scale * cuda::load(scores, base + j) - lse) : 0.f);
  if (threadIdx.x == 0) stats[size_t(h) * p.seq + p.row0 + i] = lse;
}

template <class T>
__global__ void panel_softmax_backward_kernel(AttentionPanel p, T* scores, T* dprobs, const float* stats, const float* delta) {
  const int h = int(blockIdx.x / unsigned(p.rows)), i = int(blockIdx.x % unsigned(p.rows));
  const size_t base = size_t(blockIdx.x) * p.cols, at = size_t(h) * p.seq + p.row0 + i;
  const int n = visible(p, i);
  const float lse = stats[at], d = delta[at];
  for (int j = threadIdx.x; j < p.cols; j += blockDim.x) {
    const float prob = j < n ? __expf(p.scale * cuda::load(scores, base + j) - lse) : 0.f;
    cuda::store(scores, base + j, prob);
    cuda::store(dprobs, base + j, p.scale * prob * (cuda::load(dprobs, base + j) - d));
  }
}

// One warp per (sequence, row, head).
template <class T>
__global__ void row_dot_kernel(int sequences, int seq, int heads, int head_dim, int ld, const T* dout, const T* out,
                               float* delta) {
  const size_t warp = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
  if (warp >= size_t(sequences) * seq * heads) return;  // whole warps leave together
  const int h = int(warp % heads);
  const size_t token = warp / heads, b = token / seq, i = token % seq;
  const size_t base = token * ld + size_t(h) * head_dim;
  float dot = 0;
  for (int c = int(lane); c < head_dim; c += 32) dot += cuda::load(dout, base + c) * cuda::load(out, base + c);
  dot = cuda::warp_sum(dot);
  if (lane == 0) delta[(size_t(h) * sequences + b) * seq + i] = dot;
}
}  // namespace

void attention_panel_softmax_forward_cuda(const AttentionPanel& p, void* scores, float* stats, DType t, void* stream) {
  cuda::dispatch_float(t, "attention_panel_softmax_forward", [&](auto tag) {
    using T = decltype(tag);
    panel_softmax_forward_kernel<T><<<unsigned(p.heads) * p.rows, kPanelThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        p, static_cast<T*>(scores), stats);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void attention_panel_softmax_backward_cuda(const AttentionPanel& p, void* scores, void* dprobs, const float* stats,
                                           const float* delta, DType t, void* stream) {
  cuda::dispatch_float(t, "attention_panel_softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    panel_softmax_backward_kernel<T><<<unsigned(p.heads) * p.rows, kPanelThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        p, static_cast<T*>(scores), static_cast<T*>(dprobs), stats, delta);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void attention_row_dot_cuda(int sequences, int seq, int heads, int head_dim, int ld, const void* dout, const void* out,
                            float* delta, DType t, void* stream) {
  const size_t threads = size_t(sequences) * seq * heads * 32;
  cuda::dispatch_float(t, "attention_row_dot", [&](auto tag) {
    using T = decltype(tag);
    row_dot_kernel<T><<<unsigned((threads + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        sequences, seq, heads, head_dim, ld, static_cast<const T*>(dout), static_cast<const T*>(out), delta);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
