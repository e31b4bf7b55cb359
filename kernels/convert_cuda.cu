#include "kernels/convert.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

template <class S, class D>
__global__ void convert_kernel(const S* src, D* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    cuda::store(dst, i, cuda::load(src, i));
}

void convert_cuda(const void* src, DType src_t, void* dst, DType dst_t, size_t n, void* stream) {
  if (n == 0) return;
  cuda::dispatch_float(src_t, "convert", [&](auto s) {
    cuda::dispatch_float(dst_t, "convert", [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      convert_kernel<S, D><<<cuda::grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const S*>(src), static_cast<D*>(dst), n);
    });
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
