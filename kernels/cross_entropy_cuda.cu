#include <cfloat>
#include "kernels/block_reduce.cuh"
#include "kernels/cross_entropy.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

namespace {
constexpr int kThreads = 256;

// One block per row. A target outside the vocabulary gives a NaN loss and NaN gradients (the
// host cannot be told from here; the CPU reference throws).
template <class T>
__global__ void cross_entropy_kernel(int vocab, float grad_scale, const T* logits, const int32_t* targets, float* losses,
                                     T* dlogits) {
  __shared__ float scratch[32];
  const size_t base = size_t(blockIdx.x) * vocab;
  const int t = targets[blockIdx.x];
  const bool valid = t >= 0 && t < vocab;
  float mx = -FLT_MAX;
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) mx = fmaxf(mx, cuda::load(logits, base + v));
  mx = cuda::block_reduce<true>(mx, scratch);
  float sum = 0;
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) sum += __expf(cuda::load(logits, base + v) - mx);
  sum = cuda::block_reduce<false>(sum, scratch);
  // Every thread reads the target's logit before any thread overwrites it (dlogits may alias).
  const float target_logit = valid ? cuda::load(logits, base + t) : NAN;
  __syncthreads();
  if (threadIdx.x == 0) losses[blockIdx.x] = logf(sum) + mx - target_logit;
  const float inv = 1.f / sum;
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float p = __expf(cuda::load(logits, base + v) - mx) * inv;
    cuda::store(dlogits, base + v, valid ? grad_scale * (p - (v == t ? 1.f : 0.f)) : NAN);
  }
}
}  // namespace

void cross_entropy_cuda(const CrossEntropyShape& s, const void* logits, const std::int32_t* targets, float* losses,
                        void* dlogits, DType t, void* stream) {
  if (s.rows == 0) return;
  cuda::dispatch_float(t, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_kernel<T><<<s.rows, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        s.vocab, s.grad_scale, static_cast<const T*>(logits), targets, losses, static_cast<T*>(dlogits));
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
