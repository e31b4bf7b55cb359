#include "kernels/bf16_split.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

namespace {

__global__ void split_bf16_kernel(const float* src, size_t n, int cols, Bf16Parts parts, __nv_bfloat16* dst) {
  const size_t out_cols = size_t(parts.count) * cols;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / cols;
    const int c = int(i % cols);
    const float w = src[i];
    const __nv_bfloat16 hi = __float2bfloat16_rn(w);
    const float rest = w - __bfloat162float(hi);  // exact, as on the host
    const __nv_bfloat16 lo = __float2bfloat16_rn(rest), lo2 = __float2bfloat16_rn(rest - __bfloat162float(lo));
    // Unrolled, with selects: a part picked by index from an array would live on the stack.
#pragma unroll
    for (int s = 0; s < 4; ++s)
      if (s < parts.count) {
        const int which = parts.part[s];
        dst[r * out_cols + size_t(s) * cols + c] = which == 0 ? hi : which == 1 ? lo : lo2;
      }
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
