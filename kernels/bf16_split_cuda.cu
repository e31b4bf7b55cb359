#include "kernels/bf16_split.h"
#include "kernels/bf16_split.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

namespace {

__global__ void split_bf16_kernel(const float* src, size_t n, int cols, Bf16Parts parts, __nv_bfloat16* dst) {
  const size_t out_cols = size_t(parts.count) * cols;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / cols;
    const int c = int(i % cols);
    const cuda::Bf16Triple p = cuda::bf16_parts(src[i]);
#pragma unroll
    for (int s = 0; s < 4; ++s)
      if (s < parts.count) dst[r * out_cols + size_t(s) * cols + c] = cuda::bf16_part(p, parts.part[s]);
  }
}

__global__ void sum_split3_kernel(const float* src, size_t n, int cols, float* dst) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float* row = src + (i / cols) * 3 * size_t(cols);
    const int c = int(i % cols);
    dst[i] = (row[c] + row[cols + c]) + row[2 * cols + c];
  }
}

}  // namespace

void split_bf16_cuda(const float* src, std::size_t rows, int cols, Bf16Parts parts, void* dst, void* stream) {
  const size_t n = rows * size_t(cols);
  if (n == 0) return;
  split_bf16_kernel<<<cuda::grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      src, n, cols, parts, static_cast<__nv_bfloat16*>(dst));
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void sum_split3_cuda(const float* src, std::size_t rows, int cols, float* dst, void* stream) {
  const size_t n = rows * size_t(cols);
  if (n == 0) return;
  sum_split3_kernel<<<cuda::grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(src, n, cols, dst);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
