#include "kernels/convert.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

// Four values a load and a store over the first `quads` groups (0 where an array is not
// aligned for it), then the rest one at a time: a conversion is all memory traffic.
template <class S, class D>
__global__ void convert_kernel(const S* src, D* dst, size_t n, size_t quads) {
  const size_t first = blockIdx.x * size_t(blockDim.x) + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  for (size_t q = first; q < quads; q += stride) {
    float v[4];
    cuda::load4(src, 4 * q, v);
    cuda::store4(dst, 4 * q, v);
  }
  for (size_t i = 4 * quads + first; i < n; i += stride) cuda::store(dst, i, cuda::load(src, i));
}

void convert_cuda(const void* src, DType src_t, void* dst, DType dst_t, size_t n, void* stream) {
  if (n == 0) return;
  cuda::dispatch_float(src_t, "convert", [&](auto s) {
    cuda::dispatch_float(dst_t, "convert", [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      const S* in = static_cast<const S*>(src);
      D* out = static_cast<D*>(dst);
      const size_t quads = cuda::aligned4(in) && cuda::aligned4(out) ? n / 4 : 0;
      convert_kernel<S, D><<<cuda::grid_for(quads ? quads : n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
          in, out, n, quads);
    });
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
