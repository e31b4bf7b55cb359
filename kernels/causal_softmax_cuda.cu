#include <cfloat>
#include <cstddef>
#include "kernels/block_reduce.cuh"
#include "kernels/causal_softmax.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

namespace {
constexpr int kSoftmaxThreads = 128;
// Rows whose fp32 copy (two of them in the backward) fits in 16 KiB of shared memory per block
// are read once; longer rows fall back to reading them again in each pass.
constexpr std::size_t kCachedRowBytes = 16u << 10;

// One block per row; row i of its matrix sees columns 0..i.
template <class T>
__global__ void causal_softmax_forward_kernel(int seq, float scale, const T* scores, T* probs) {
  __shared__ float scratch[32];
  const int i = int(blockIdx.x % unsigned(seq));
  const size_t base = size_t(blockIdx.x) * seq;
  float mx = -FLT_MAX;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) mx = fmaxf(mx, scale * cuda::load(scores, base + j));
  mx = cuda::block_reduce<true>(mx, scratch);
  float sum = 0;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) sum += __expf(scale * cuda::load(scores, base + j) - mx);
  const float inv = 1.f / cuda::block_reduce<false>(sum, scratch);
  for (int j = threadIdx.x; j < seq; j += blockDim.x)
    cuda::store(probs, base + j, j <= i ? __expf(scale * cuda::load(scores, base + j) - mx) * inv : 0.f);
}

// The same rows read once: each thread keeps the scaled scores it loads (then their exponentials)
// in shared memory, at the columns it alone handles, so no barrier orders them; the reductions
// are block_reduce's. Results equal the kernel above's bit for bit (same per-thread order).
template <class T>
__global__ void causal_softmax_forward_cached_kernel(int seq, float scale, const T* scores, T* probs) {
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const int i = int(blockIdx.x % unsigned(seq));
  const size_t base = size_t(blockIdx.x) * seq;
  float mx = -FLT_MAX;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) {
    row[j] = scale * cuda::load(scores, base + j);
    mx = fmaxf(mx, row[j]);
  }
  mx = cuda::block_reduce<true>(mx, scratch);
  float sum = 0;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) {
    row[j] = __expf(row[j] - mx);
    sum += row[j];
  }
  const float inv = 1.f / cuda::block_reduce<false>(sum, scratch);
  for (int j = threadIdx.x; j < seq; j += blockDim.x) cuda::store(probs, base + j, j <= i ? row[j] * inv : 0.f);
}

template <class T>
__global__ void causal_softmax_backward_cached_kernel(int seq, float scale, const T* probs, const T* dprobs, T* dscores) {
  extern __shared__ float row[];  // [seq] probabilities, then [seq] their gradients
  __shared__ float scratch[32];
  const int i = int(blockIdx.x % unsigned(seq));
  const size_t base = size_t(blockIdx.x) * seq;
  float dot = 0;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) {
    row[j] = cuda::load(probs, base + j);
    row[seq + j] = cuda::load(dprobs, base + j);
    dot += row[j] * row[seq + j];
  }
  dot = cuda::block_reduce<false>(dot, scratch);
  for (int j = threadIdx.x; j < seq; j += blockDim.x)
    cuda::store(dscores, base + j, j <= i ? scale * row[j] * (row[seq + j] - dot) : 0.f);
}

template <class T>
__global__ void causal_softmax_backward_kernel(int seq, float scale, const T* probs, const T* dprobs, T* dscores) {
  __shared__ float scratch[32];
  const int i = int(blockIdx.x % unsigned(seq));
  const size_t base = size_t(blockIdx.x) * seq;
  float dot = 0;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) dot += cuda::load(probs, base + j) * cuda::load(dprobs, base + j);
  dot = cuda::block_reduce<false>(dot, scratch);
  for (int j = threadIdx.x; j < seq; j += blockDim.x) {
    const float v = j <= i ? scale * cuda::load(probs, base + j) * (cuda::load(dprobs, base + j) - dot) : 0.f;
    cuda::store(dscores, base + j, v);  // dscores may alias dprobs: each element is read before it is written
  }
}
}  // namespace

void causal_softmax_forward_cuda(const CausalSoftmaxShape& s, const void* scores, void* probs, DType t, void* stream) {
  const size_t rows = size_t(s.matrices) * s.seq;
  if (rows == 0) return;
  if (rows > 0x7fffffffu) throw Error("causal_softmax_forward: more than 2^31 rows");
  cuda::dispatch_float(t, "causal_softmax_forward", [&](auto tag) {
    using T = decltype(tag);
    const auto st = static_cast<cudaStream_t>(stream);
    const std::size_t cached = std::size_t(s.seq) * sizeof(float);
    if (cached <= kCachedRowBytes)
      causal_softmax_forward_cached_kernel<T><<<unsigned(rows), kSoftmaxThreads, cached, st>>>(
          s.seq, s.scale, static_cast<const T*>(scores), static_cast<T*>(probs));
    else
      causal_softmax_forward_kernel<T><<<unsigned(rows), kSoftmaxThreads, 0, st>>>(s.seq, s.scale, static_cast<const T*>(scores),
                                                                           static_cast<T*>(probs));
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void causal_softmax_backward_cuda(const CausalSoftmaxShape& s, const void* probs, const void* dprobs, void* dscores, DType t,
                                  void* stream) {
  const size_t rows = size_t(s.matrices) * s.seq;
  if (rows == 0) return;
  if (rows > 0x7fffffffu) throw Error("causal_softmax_backward: more than 2^31 rows");
  cuda::dispatch_float(t, "causal_softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const auto st = static_cast<cudaStream_t>(stream);
    const std::size_t cached = 2 * std::size_t(s.seq) * sizeof(float);
    if (cached <= kCachedRowBytes)
      causal_softmax_backward_cached_kernel<T><<<unsigned(rows), kSoftmaxThreads, cached, st>>>(
          s.seq, s.scale, static_cast<const T*>(probs), static_cast<const T*>(dprobs), static_cast<T*>(dscores));
    else
      causal_softmax_backward_kernel<T><<<unsigned(rows), kSoftmaxThreads, 0, st>>>(
          s.seq, s.scale, static_cast<const T*>(probs), static_cast<const T*>(dprobs), static_cast<T*>(dscores));
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
