#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/gelu.h"
#include "kernels/gelu_math.h"

namespace moebench {

template <class T>
__global__ void gelu_forward_kernel(const T* x, T* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    cuda::store(y, i, gelu_math::forward(cuda::load(x, i)));
}

template <class T>
__global__ void gelu_backward_kernel(const T* x, const T* dy, T* dx, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    cuda::store(dx, i, cuda::load(dy, i) * gelu_math::derivative(cuda::load(x, i)));
}

void gelu_forward_cuda(const void* x, void* y, size_t n, DType t, void* stream) {
  if (n == 0) return;
  cuda::dispatch_float(t, "gelu_forward", [&](auto tag) {
    using T = decltype(tag);
    gelu_forward_kernel<T><<<cuda::grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), n);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void gelu_backward_cuda(const void* x, const void* dy, void* dx, size_t n, DType t, void* stream) {
  if (n == 0) return;
  cuda::dispatch_float(t, "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    gelu_backward_kernel<T><<<cuda::grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), n);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
