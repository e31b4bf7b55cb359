#include "kernels/axpy.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

template <class T>
__global__ void axpy_kernel(size_t n, float alpha, const T* x, T* y) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    cuda::store(y, i, cuda::load(y, i) + alpha * cuda::load(x, i));
}

void axpy_cuda(size_t n, float alpha, const void* x, void* y, DType t, void* stream) {
  if (n == 0) return;
  cuda::dispatch_float(t, "axpy", [&](auto tag) {
    using T = decltype(tag);
    axpy_kernel<T><<<cuda::grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(n, alpha, static_cast<const T*>(x),
                                                                                          static_cast<T*>(y));
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
