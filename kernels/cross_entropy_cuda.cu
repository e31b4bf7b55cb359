#include <cfloat>
#include "kernels/block_reduce.cuh"
#include "kernels/cross_entropy.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

namespace {
constexpr int kCrossEntropyThreads = 256;

// One block per row, two passes over it: the maximum and the sum of exponentials together
// (online softmax), then the gradient; four logits per load where the vocabulary and the arrays
// allow (kByFour). A target outside the vocabulary gives a NaN loss and NaN gradients (the host
// cannot be told from here; the CPU reference throws).
template <class T, bool kByFour>
__global__ void cross_entropy_kernel(int vocab, float grad_scale, const T* logits, const int32_t* targets, float* losses,
                                     T* dlogits) {
  __shared__ float sm[32], ss[32];
  const size_t base = size_t(blockIdx.x) * vocab;
  const int t = targets[blockIdx.x];
  const bool valid = t >= 0 && t < vocab;
  float mx = -FLT_MAX, sum = 0;
  if constexpr (kByFour) {
    for (int q = threadIdx.x; q < vocab / 4; q += blockDim.x) {
      float x[4];
      cuda::load4(logits, base + 4 * size_t(q), x);
      const float nm = fmaxf(mx, fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3])));
      sum = sum * __expf(mx - nm) + ((__expf(x[0] - nm) + __expf(x[1] - nm)) + (__expf(x[2] - nm) + __expf(x[3] - nm)));
      mx = nm;
    }
  } else {
    for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
      const float x = cuda::load(logits, base + v), nm = fmaxf(mx, x);
      sum = sum * __expf(mx - nm) + __expf(x - nm);
      mx = nm;
    }
  }
  cuda::block_max_sum(mx, sum, sm, ss);
  // Every thread reads the target's logit before any thread overwrites it (dlogits may alias).
  const float target_logit = valid ? cuda::load(logits, base + t) : NAN;
  __syncthreads();
  if (threadIdx.x == 0) losses[blockIdx.x] = logf(sum) + mx - target_logit;
  const float inv = 1.f / sum;
  if constexpr (kByFour) {
    for (int q = threadIdx.x; q < vocab / 4; q += blockDim.x) {
      float x[4];
      cuda::load4(logits, base + 4 * size_t(q), x);
      for (int e = 0; e < 4; ++e)
        x[e] = valid ? grad_scale * (__expf(x[e] - mx) * inv - (4 * q + e == t ? 1.f : 0.f)) : NAN;
      cuda::store4(dlogits, base + 4 * size_t(q), x);
    }
  } else {
    for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
      const float p = __expf(cuda::load(logits, base + v) - mx) * inv;
      cuda::store(dlogits, base + v, valid ? grad_scale * (p - (v == t ? 1.f : 0.f)) : NAN);
    }
  }
}
}  // namespace

void cross_entropy_cuda(const CrossEntropyShape& s, const void* logits, const std::int32_t* targets, float* losses,
                        void* dlogits, DType t, void* stream) {
  if (s.rows == 0) return;
  cuda::dispatch_float(t, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(logits);
    T* out = static_cast<T*>(dlogits);
    const auto st = static_cast<cudaStream_t>(stream);
    if (s.vocab % 4 == 0 && cuda::aligned4(in) && cuda::aligned4(out))
      cross_entropy_kernel<T, true><<<s.rows, kCrossEntropyThreads, 0, st>>>(s.vocab, s.grad_scale, in, targets, losses, out);
    else
      cross_entropy_kernel<T, false><<<s.rows, kCrossEntropyThreads, 0, st>>>(s.vocab, s.grad_scale, in, targets, losses, out);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
