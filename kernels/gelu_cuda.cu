#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/gelu.h"
#include "kernels/gelu_math.h"

namespace moebench {

// 16-bit data through the logistic form and the hardware's exp2 and reciprocal, fp32 data through
// the CPU's rational tanh (kernels/gelu_math.h): a few fp32 ulps apart, below 16-bit rounding.
template <class T>
__device__ __forceinline__ float gelu_of(float x) {
  if constexpr (sizeof(T) == 2)
    return gelu_math::forward_logistic(x);
  else
    return gelu_math::forward(x);
}

template <class T>
__device__ __forceinline__ float gelu_derivative_of(float x) {
  if constexpr (sizeof(T) == 2)
    return gelu_math::derivative_logistic(x);
  else
    return gelu_math::derivative(x);
}

// Sixteen bytes a load and a store (4 fp32 or 8 16-bit values) over the first `groups` groups (0
// where an array is not aligned for it), then the rest one at a time: the kernels are memory-bound.
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
  for (size_t q = first; q < groups; q += stride) {
    float a[W], g[W];
    cuda::load_wide(x, W * q, a);
    cuda::load_wide(dy, W * q, g);
    for (int e = 0; e < W; ++e) g[e] *= gelu_derivative_of<T>(a[e]);
    cuda::store_wide(dx, W * q, g);
  }
  for (size_t i = W * groups + first; i < n; i += stride)
    cuda::store(dx, i, cuda::load(dy, i) * gelu_derivative_of<T>(cuda::load(x, i)));
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
