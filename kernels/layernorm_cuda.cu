#include <algorithm>
#include <type_traits>
#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/layernorm.h"

namespace moebench {

namespace {
constexpr int kLayerNormThreads = 256;

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

// One warp per row, the row in registers (kQuads groups of four values per lane: rows of up to
// 128 kQuads values, a multiple of 4), read once with 8- or 16-byte loads, reduced by shuffles:
// the block-per-row kernels above spend a row of 1024 on three block-wide barriers and scalar
// loads. Rows of `rows` end the grid; the whole warp leaves together.
template <class T, int kQuads>
__global__ void layernorm_forward_warp_kernel(int rows, int cols, const T* x, const float* gamma, const float* beta, T* y,
                                              float* mean, float* rstd) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32, quads = cols / 4;
  if (row >= rows) return;
  const size_t base = size_t(row) * cols;
  float v[kQuads][4];
  float sum = 0;
#pragma unroll
  for (int k = 0; k < kQuads; ++k)
    if (lane + 32 * k < quads) {
      cuda::load4(x, base + 4 * (lane + 32 * k), v[k]);
      sum += (v[k][0] + v[k][1]) + (v[k][2] + v[k][3]);
    }
  const float mu = cuda::warp_sum(sum) / cols;
  float sq = 0;
#pragma unroll
  for (int k = 0; k < kQuads; ++k)
    if (lane + 32 * k < quads)
      for (int e = 0; e < 4; ++e) sq += (v[k][e] - mu) * (v[k][e] - mu);
  const float rs = rsqrtf(cuda::warp_sum(sq) / cols + kLayerNormEps);
#pragma unroll
  for (int k = 0; k < kQuads; ++k) {
    const int c = 4 * (lane + 32 * k);
    if (c < cols) {
      float g[4], b[4], out[4];
      cuda::load4(gamma, c, g);
      cuda::load4(beta, c, b);
      for (int e = 0; e < 4; ++e) out[e] = (v[k][e] - mu) * rs * g[e] + b[e];
      cuda::store4(y, base + c, out);
    }
  }
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

template <class T, int kQuads>
__global__ void layernorm_dx_warp_kernel(int rows, int cols, const T* x, const T* dy, const float* gamma, const float* mean,
                                         const float* rstd, T* dx) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const size_t base = size_t(row) * cols;
  const float mu = mean[row], rs = rstd[row];
  float xhat[kQuads][4], dyg[kQuads][4];  // (x - mean) rstd and dy gamma
  float a = 0, b = 0;
#pragma unroll
  for (int k = 0; k < kQuads; ++k) {
    const int c = 4 * (lane + 32 * k);
    if (c < cols) {
      float g[4];
      cuda::load4(x, base + c, xhat[k]);
      cuda::load4(dy, base + c, dyg[k]);
      cuda::load4(gamma, c, g);
      for (int e = 0; e < 4; ++e) {
        xhat[k][e] = (xhat[k][e] - mu) * rs;
        dyg[k][e] *= g[e];
        a += dyg[k][e];
        b += dyg[k][e] * xhat[k][e];
      }
    }
  }
  a = cuda::warp_sum(a) / cols;
  b = cuda::warp_sum(b) / cols;
#pragma unroll
  for (int k = 0; k < kQuads; ++k) {
    const int c = 4 * (lane + 32 * k);
    if (c < cols) {
      float out[4];
      for (int e = 0; e < 4; ++e) out[e] = rs * (dyg[k][e] - a - xhat[k][e] * b);
      cuda::store4(dx, base + c, out);
    }
  }
}

// The groups of four per lane a warp kernel needs for rows of `cols` (every array read four at a
// time: a row starts four-aligned when its array does and cols % 4 == 0), or 0 where a row does
// not fit them: the block-per-row kernels take it.
int warp_row_quads(int cols, bool four_aligned) {
  if (!four_aligned || cols % 4 != 0 || cols > 32 * 4 * 8) return 0;
  const int per_lane = (cols / 4 + 31) / 32;
  return per_lane <= 1 ? 1 : per_lane <= 2 ? 2 : per_lane <= 4 ? 4 : 8;
}

template <int kQuads, class F> void with_quads(int quads, F&& f) {
  if (quads == kQuads) f(std::integral_constant<int, kQuads>{});
  if constexpr (kQuads > 1) with_quads<kQuads / 2>(quads, f);
}

constexpr int kWarpRowsPerBlock = 8;

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
    const auto st = static_cast<cudaStream_t>(stream);
    const int quads = warp_row_quads(s.cols, cuda::aligned4(gamma) && cuda::aligned4(beta) &&
                                                 cuda::aligned4(static_cast<const T*>(x)) && cuda::aligned4(static_cast<T*>(y)));
    if (quads == 0) {
      layernorm_forward_kernel<T><<<s.rows, kLayerNormThreads, 0, st>>>(s.cols, static_cast<const T*>(x), gamma, beta,
                                                               static_cast<T*>(y), mean, rstd);
      return;
    }
    const unsigned blocks = unsigned((s.rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock);
    with_quads<8>(quads, [&](auto q) {
      layernorm_forward_warp_kernel<T, decltype(q)::value><<<blocks, 32 * kWarpRowsPerBlock, 0, st>>>(
          s.rows, s.cols, static_cast<const T*>(x), gamma, beta, static_cast<T*>(y), mean, rstd);
    });
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void layernorm_backward_cuda(const LayerNormShape& s, const void* x, const void* dy, const float* gamma, const float* mean,
                             const float* rstd, void* dx, float* dgamma, float* dbeta, DType t, void* stream) {
  if (s.rows == 0) return;
  const auto st = static_cast<cudaStream_t>(stream);
  cuda::dispatch_float(t, "layernorm_backward", [&](auto tag) {
    using T = decltype(tag);
    const int quads = warp_row_quads(s.cols, cuda::aligned4(gamma) && cuda::aligned4(static_cast<const T*>(x)) &&
                                                 cuda::aligned4(static_cast<const T*>(dy)) && cuda::aligned4(static_cast<T*>(dx)));
    if (quads == 0) {
      layernorm_dx_kernel<T><<<s.rows, kLayerNormThreads, 0, st>>>(s.cols, static_cast<const T*>(x), static_cast<const T*>(dy),
                                                                   gamma, mean, rstd, static_cast<T*>(dx));
    } else {
      const unsigned blocks = unsigned((s.rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock);
      with_quads<8>(quads, [&](auto q) {
        layernorm_dx_warp_kernel<T, decltype(q)::value><<<blocks, 32 * kWarpRowsPerBlock, 0, st>>>(
            s.rows, s.cols, static_cast<const T*>(x), static_cast<const T*>(dy), gamma, mean, rstd, static_cast<T*>(dx));
      });
    }
    const dim3 grid((s.cols + 31) / 32, unsigned(std::min(s.rows / 8 + 1, 64)));
    layernorm_dparams_kernel<T><<<grid, dim3(32, 8), 0, st>>>(s.rows, s.cols, static_cast<const T*>(x),
                                                               static_cast<const T*>(dy), mean, rstd, dgamma, dbeta);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
