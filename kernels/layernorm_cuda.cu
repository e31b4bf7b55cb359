#include <algorithm>
#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/layernorm.h"

namespace moebench {

namespace {
constexpr int kThreads = 256;

// One block per row: the mean, then the variance around it (two passes, as the CPU does).
template <class T>
__global__ void layernorm_forward_kernel(int cols, const T* x, const float* gamma, const float* beta, T* y, float* mean,
                                         float* rstd) {
  __shared__ float scratch[32];
  const size_t base = size_t(blockIdx.x) * cols;
  float sum = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += cuda::load(x, base + c);
  const float mu = cuda::block_reduce<false>(sum, scratch) / cols;
  float sq = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = cuda::load(x, base + c) - mu;
    sq += d * d;
  }
  const float rs = rsqrtf(cuda::block_reduce<false>(sq, scratch) / cols + kLayerNormEps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    cuda::store(y, base + c, (cuda::load(x, base + c) - mu) * rs * gamma[c] + beta[c]);
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = mu;
    rstd[blockIdx.x] = rs;
  }
}

// One block per row: dx from the row's two means.
template <class T>
__global__ void layernorm_dx_kernel(int cols, const T* x, const T* dy, const float* gamma, const float* mean,
                                    const float* rstd, T* dx) {
  __shared__ float scratch[32];
  const size_t base = size_t(blockIdx.x) * cols;
  const float mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
  float a = 0, b = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = cuda::load(dy, base + c) * gamma[c];
    a += g;
    b += g * (cuda::load(x, base + c) - mu) * rs;
  }
  a = cuda::block_reduce<false>(a, scratch) / cols;
  b = cuda::block_reduce<false>(b, scratch) / cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = (cuda::load(x, base + c) - mu) * rs;
    cuda::store(dx, base + c, rs * (cuda::load(dy, base + c) * gamma[c] - a - xhat * b));
  }
}

// Column sums for dgamma and dbeta: a block covers 32 columns and a slice of the rows (8 rows
// at a time), reduces its 8 partials in shared memory and adds them to the gradients.
template <class T>
__global__ void layernorm_dparams_kernel(int rows, int cols, const T* x, const T* dy, const float* mean, const float* rstd,
                                         float* dgamma, float* dbeta) {
  __shared__ float sg[8][33], sb[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float g = 0, b = 0;
  if (c < cols)
    for (int r = blockIdx.y * 8 + threadIdx.y; r < rows; r += gridDim.y * 8) {
      const size_t i = size_t(r) * cols + c;
      const float d = cuda::load(dy, i);
      g += d * (cuda::load(x, i) - mean[r]) * rstd[r];
      b += d;
    }
  sg[threadIdx.y][threadIdx.x] = g;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int k = 1; k < 8; ++k) {
      g += sg[k][threadIdx.x];
      b += sb[k][threadIdx.x];
    }
    atomicAdd(dgamma + c, g);
    atomicAdd(dbeta + c, b);
  }
}
}  // namespace

void layernorm_forward_cuda(const LayerNormShape& s, const void* x, const float* gamma, const float* beta, void* y,
                            float* mean, float* rstd, DType t, void* stream) {
  if (s.rows == 0) return;
  cuda::dispatch_float(t, "layernorm_forward", [&](auto tag) {
    using T = decltype(tag);
    layernorm_forward_kernel<T><<<s.rows, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        s.cols, static_cast<const T*>(x), gamma, beta, static_cast<T*>(y), mean, rstd);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void layernorm_backward_cuda(const LayerNormShape& s, const void* x, const void* dy, const float* gamma, const float* mean,
                             const float* rstd, void* dx, float* dgamma, float* dbeta, DType t, void* stream) {
  if (s.rows == 0) return;
  const auto st = static_cast<cudaStream_t>(stream);
  cuda::dispatch_float(t, "layernorm_backward", [&](auto tag) {
    using T = decltype(tag);
    layernorm_dx_kernel<T><<<s.rows, kThreads, 0, st>>>(s.cols, static_cast<const T*>(x), static_cast<const T*>(dy), gamma,
                                                         mean, rstd, static_cast<T*>(dx));
    const dim3 grid((s.cols + 31) / 32, unsigned(std::min(s.rows / 8 + 1, 64)));
    layernorm_dparams_kernel<T><<<grid, dim3(32, 8), 0, st>>>(s.rows, s.cols, static_cast<const T*>(x),
                                                               static_cast<const T*>(dy), mean, rstd, dgamma, dbeta);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
