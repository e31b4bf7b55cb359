#include "kernels/axpy.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

// y += alpha x, four values a load and a store over the first `quads` groups (0 where an array
// is not aligned for it), then the rest one at a time.
template <class T>
__global__ void axpy_kernel(size_t n, size_t quads, float alpha, const T* x, T* y) {
  const size_t first = blockIdx.x * size_t(blockDim.x) + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  for (size_t q = first; q < quads; q += stride) {
    float a[4], b[4];
    cuda::load4(x, 4 * q, a);
    cuda::load4(y, 4 * q, b);
    for (int e = 0; e < 4; ++e) b[e] += alpha * a[e];
    cuda::store4(y, 4 * q, b);
  }
  for (size_t i = 4 * quads + first; i < n; i += stride) cuda::store(y, i, cuda::load(y, i) + alpha * cuda::load(x, i));
}

void axpy_cuda(size_t n, float alpha, const void* x, void* y, DType t, void* stream) {
  if (n == 0) return;
  cuda::dispatch_float(t, "axpy", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
    const size_t quads = cuda::aligned4(in) && cuda::aligned4(out) ? n / 4 : 0;
    axpy_kernel<T><<<cuda::grid_for(quads ? quads : n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(n, quads, alpha,
                                                                                                          in, out);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
