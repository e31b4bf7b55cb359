#include "kernels/swap_dims.h"
#include <cstring>
#include <string>

namespace moebench {

void swap_dims_cpu(int outer, int inner, std::size_t width_bytes, const void* src, void* dst) {
  const auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(dst);
  for (int o = 0; o < outer; ++o)
    for (int i = 0; i < inner; ++i)
      std::memcpy(d + (std::size_t(i) * outer + o) * width_bytes, s + (std::size_t(o) * inner + i) * width_bytes,
                  width_bytes);
}

void swap_dims(const Exec& ex, int outer, int inner, int width, std::size_t element_bytes, const void* src, void* dst) {
  if (outer < 0 || inner < 0 || width < 1 || element_bytes == 0)
    throw Error("swap_dims: [" + std::to_string(outer) + ", " + std::to_string(inner) + ", " + std::to_string(width) +
                "] of " + std::to_string(element_bytes) + "-byte elements");
  const std::size_t width_bytes = std::size_t(width) * element_bytes, bytes = std::size_t(outer) * inner * width_bytes;
  if (bytes == 0) return;
  const auto *s = static_cast<const char*>(src), *d = static_cast<const char*>(dst);
  if (s < d + bytes && d < s + bytes) throw Error("swap_dims: source and destination overlap");
  if (ex.backend == Backend::cuda) return swap_dims_cuda(outer, inner, width_bytes, src, dst, ex.stream);
  run_host(ex, "swap_dims", [=] { swap_dims_cpu(outer, inner, width_bytes, src, dst); });
}

#if !MOEBENCH_WITH_CUDA
void swap_dims_cuda(int, int, std::size_t, const void*, void*, void*) { cuda_not_built("swap_dims"); }
#endif

}  // namespace moebench
