#include <algorithm>
#include <cstdint>
#include "kernels/cuda_check.cuh"
#include "kernels/swap_dims.h"

namespace moebench {

namespace {
// One block per source vector (o, i): its width in Units, copied to (i, o).
template <class Unit>
__global__ void swap_dims_kernel(int outer, int inner, size_t units, const Unit* src, Unit* dst) {
  const size_t v = blockIdx.x;
  const size_t o = v / unsigned(inner), i = v % unsigned(inner);
  const Unit* from = src + v * units;
  Unit* to = dst + (i * outer + o) * units;
  for (size_t u = threadIdx.x; u < units; u += blockDim.x) to[u] = from[u];
}

template <class Unit>
void launch(int outer, int inner, std::size_t width_bytes, const void* src, void* dst, cudaStream_t s) {
  const std::size_t units = width_bytes / sizeof(Unit);
  const unsigned threads = unsigned(std::min<std::size_t>(256, (units + 31) / 32 * 32));
  swap_dims_kernel<Unit><<<unsigned(std::size_t(outer) * inner), threads, 0, s>>>(
      outer, inner, units, static_cast<const Unit*>(src), static_cast<Unit*>(dst));
  MOEBENCH_CUDA_LAUNCH_CHECK();
}
}  // namespace

void swap_dims_cuda(int outer, int inner, std::size_t width_bytes, const void* src, void* dst, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const auto aligned = [&](std::size_t unit) {
    return width_bytes % unit == 0 && reinterpret_cast<std::uintptr_t>(src) % unit == 0 &&
           reinterpret_cast<std::uintptr_t>(dst) % unit == 0;
  };
  if (aligned(16)) return launch<uint4>(outer, inner, width_bytes, src, dst, s);
  if (aligned(4)) return launch<std::uint32_t>(outer, inner, width_bytes, src, dst, s);
  if (aligned(2)) return launch<std::uint16_t>(outer, inner, width_bytes, src, dst, s);
  launch<unsigned char>(outer, inner, width_bytes, src, dst, s);
}

}  // namespace moebench
