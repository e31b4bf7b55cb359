#include <algorithm>
#include <vector>
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/gelu.h"
#include "kernels/gelu_math.h"

namespace moebench {

// 16-bit data through the logistic form and the hardware's exp2 and reciprocal, fp32 data through
// the CPU's rational tanh (kernels/gelu_math.h): a few fp32 ulps apart, below 16-bit rounding.
template <class T>
__device__ __forceinline__ float gelu_of(float x) {
  return sizeof(T) == 2 ? gelu_math::forward_logistic(x) : gelu_math::forward(x);
}
template <class T>
__device__ __forceinline__ float gelu_derivative_of(float x) {
  return sizeof(T) == 2 ? gelu_math::derivative_logistic(x) : gelu_math::derivative(x);
}

// GeLU's gradient of group q (kWide<T> elements, sixteen bytes) or of element i: dx = dy * gelu'(x).
template <class T>
__device__ __forceinline__ void gelu_gradient_group(const T* x, const T* dy, T* dx, size_t q) {
  constexpr int W = cuda::kWide<T>;
  float a[W], g[W];
  cuda::load_wide(x, W * q, a);
  cuda::load_wide(dy, W * q, g);
  for (int e = 0; e < W; ++e) g[e] *= gelu_derivative_of<T>(a[e]);
  cuda::store_wide(dx, W * q, g);
}
template <class T>
__device__ __forceinline__ void gelu_gradient_element(const T* x, const T* dy, T* dx, size_t i) {
  cuda::store(dx, i, cuda::load(dy, i) * gelu_derivative_of<T>(cuda::load(x, i)));
}

// Sixteen bytes a load and a store (4 fp32 or 8 16-bit values) over the first `groups` groups (0
// where an array is not aligned for it), then the rest one at a time: the kernels should stream.
template <class T>
__global__ void gelu_forward_kernel(const T* x, T* y, size_t n, size_t groups) {
  constexpr int W = cuda::kWide<T>;
  const size_t first = blockIdx.x * size_t(blockDim.x) + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  for (size_t q = first; q < groups; q += stride) {
    float v[W];
    cuda::load_wide(x, W * q, v);
    for (int e = 0; e < W; ++e) v[e] = gelu_of<T>(v[e]);
    cuda::store_wide(y, W * q, v);
  }
  for (size_t i = W * groups + first; i < n; i += stride) cuda::store(y, i, gelu_of<T>(cuda::load(x, i)));
}

template <class T>
__global__ void gelu_backward_kernel(const T* x, const T* dy, T* dx, size_t n, size_t groups) {
  constexpr int W = cuda::kWide<T>;
  const size_t first = blockIdx.x * size_t(blockDim.x) + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  for (size_t q = first; q < groups; q += stride) gelu_gradient_group(x, dy, dx, q);
  for (size_t i = W * groups + first; i < n; i += stride) gelu_gradient_element(x, dy, dx, i);
}

// gelu_backward_in_blocks: one block per expert row of a chunk of experts, passed by value (the
// host's arrays need not outlive the call). Row b of the chunk is expert e's (b - first[e])-th,
// at padded_first[e] + that in the layout; the padding rows are no block's.
constexpr int kChunkExperts = 128;  // the parameter, 2 KiB, under the 4 KiB every toolkit takes
struct ExpertRowsChunk {
  long long first[kChunkExperts + 1];     // each expert's first row among the chunk's, and the end
  long long padded_first[kChunkExperts];  // its first row in the padded layout
  int count;
};

template <class T>
__global__ void gelu_backward_rows_kernel(ExpertRowsChunk chunk, int width, bool wide, const T* x, T* d) {
  const long long b = blockIdx.x;
  int lo = 0, hi = chunk.count - 1;  // the last expert whose rows start at or before b: its range holds b
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (chunk.first[mid] <= b) lo = mid; else hi = mid - 1;
  }
  const size_t row = size_t(chunk.padded_first[lo] + (b - chunk.first[lo])) * size_t(width);
  const T* xr = x + row;
  T* dr = d + row;
  if (wide) {
    for (int q = threadIdx.x; q < width / cuda::kWide<T>; q += blockDim.x) gelu_gradient_group(xr, dr, dr, size_t(q));
    return;
  }
  for (int i = threadIdx.x; i < width; i += blockDim.x) gelu_gradient_element(xr, dr, dr, size_t(i));
}

void gelu_backward_in_blocks_cuda(const RowPadding& p, const void* x, void* d, void* stream) {
  const std::vector<std::size_t> start = padded_starts(p.offset, p.padded);
  cuda::dispatch_float(p.dtype, "gelu_backward_in_blocks", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(d);
    // Sixteen bytes a load where every row starts on sixteen (rows of whole groups, aligned bases).
    const bool wide = p.width % cuda::kWide<T> == 0 && cuda::aligned_wide(in) && cuda::aligned_wide(out);
    const unsigned threads = unsigned(std::min(256, std::max(32, (p.width / (wide ? cuda::kWide<T> : 1) + 31) / 32 * 32)));
    for (int first = 0; first < p.experts(); first += kChunkExperts) {
      ExpertRowsChunk chunk{};
      chunk.count = std::min(kChunkExperts, p.experts() - first);
      for (int i = 0; i < chunk.count; ++i) {
        chunk.first[i + 1] = chunk.first[i] + (long long)p.rows(first + i);
        chunk.padded_first[i] = (long long)start[first + i];
      }
      if (chunk.first[chunk.count] == 0 || p.width == 0) continue;
      gelu_backward_rows_kernel<T><<<unsigned(chunk.first[chunk.count]), threads, 0, static_cast<cudaStream_t>(stream)>>>(
          chunk, p.width, wide, in, out);
      MOEBENCH_CUDA_LAUNCH_CHECK();
    }
  });
}

void gelu_forward_cuda(const void* x, void* y, size_t n, DType t, void* stream) {
  if (n == 0) return;
  cuda::dispatch_float(t, "gelu_forward", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
    const size_t groups = cuda::aligned_wide(in) && cuda::aligned_wide(out) ? n / cuda::kWide<T> : 0;
    gelu_forward_kernel<T><<<cuda::grid_for(groups ? groups : n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        in, out, n, groups);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void gelu_backward_cuda(const void* x, const void* dy, void* dx, size_t n, DType t, void* stream) {
  if (n == 0) return;
  cuda::dispatch_float(t, "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x);
    const T* grad = static_cast<const T*>(dy);
    T* out = static_cast<T*>(dx);
    const size_t groups =
        cuda::aligned_wide(in) && cuda::aligned_wide(grad) && cuda::aligned_wide(out) ? n / cuda::kWide<T> : 0;
    gelu_backward_kernel<T><<<cuda::grid_for(groups ? groups : n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        in, grad, out, n, groups);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
