#include <cfloat>
#include "kernels/block_reduce.cuh"
#include "kernels/causal_softmax.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

namespace {
constexpr int kThreads = 128;

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
    causal_softmax_forward_kernel<T><<<unsigned(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        s.seq, s.scale, static_cast<const T*>(scores), static_cast<T*>(probs));
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
    causal_softmax_backward_kernel<T><<<unsigned(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        s.seq, s.scale, static_cast<const T*>(probs), static_cast<const T*>(dprobs), static_cast<T*>(dscores));
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
