#include <string>
#include "kernels/bf16_split.h"
#include "kernels/convert.h"

namespace moebench {

static void check_parts(const Bf16Parts& parts) {
  if (parts.count < 1 || parts.count > 4) throw Error("split_bf16: " + std::to_string(parts.count) + " slices; allowed: 1 to 4");
  for (int s = 0; s < parts.count; ++s)
    if (parts.part[s] < 0 || parts.part[s] > 2)
      throw Error("split_bf16: part " + std::to_string(parts.part[s]) + "; allowed: 0 (hi), 1 (lo), 2 (lo2)");
}

void split_bf16_cpu(const float* src, std::size_t rows, int cols, Bf16Parts parts, std::uint16_t* dst) {
  const std::size_t out_cols = std::size_t(parts.count) * cols;
  for (std::size_t r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const float w = src[r * cols + c];
      std::uint16_t bits[3];
      bits[0] = to_bits16(DType::bf16, w);
      const float rest = w - from_bits16(DType::bf16, bits[0]);  // exact: w and hi share their leading bits
      bits[1] = to_bits16(DType::bf16, rest);
      bits[2] = to_bits16(DType::bf16, rest - from_bits16(DType::bf16, bits[1]));
      for (int s = 0; s < parts.count; ++s) dst[r * out_cols + std::size_t(s) * cols + c] = bits[parts.part[s]];
    }
}

void sum_split3_cpu(const float* src, std::size_t rows, int cols, float* dst) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* row = src + r * 3 * std::size_t(cols);
    for (int c = 0; c < cols; ++c) dst[r * cols + c] = (row[c] + row[cols + c]) + row[2 * cols + c];
  }
}

void split_bf16(const Exec& ex, const float* src, std::size_t rows, int cols, Bf16Parts parts, void* dst) {
  check_parts(parts);
  if (ex.backend == Backend::cuda) return split_bf16_cuda(src, rows, cols, parts, dst, ex.stream);
  run_host(ex, "split_bf16", [=] { split_bf16_cpu(src, rows, cols, parts, static_cast<std::uint16_t*>(dst)); });
}

void sum_split3(const Exec& ex, const float* src, std::size_t rows, int cols, float* dst) {
  if (ex.backend == Backend::cuda) return sum_split3_cuda(src, rows, cols, dst, ex.stream);
  run_host(ex, "sum_split3", [=] { sum_split3_cpu(src, rows, cols, dst); });
}

#if !MOEBENCH_WITH_CUDA
void split_bf16_cuda(const float*, std::size_t, int, Bf16Parts, void*, void*) { cuda_not_built("split_bf16"); }
void sum_split3_cuda(const float*, std::size_t, int, float*, void*) { cuda_not_built("sum_split3"); }
#endif

}  // namespace moebench
