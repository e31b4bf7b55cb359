#include <cstring>
#include <string>
#include "kernels/pad_rows.h"

namespace moebench {

static void check_padding(const RowPadding& p) {
  if (p.offset.empty()) throw Error("pad_rows: no expert offsets");
  for (int e = 0; e < p.experts(); ++e)
    if (p.offset[e + 1] < p.offset[e] || p.offset[e + 1] - p.offset[e] > std::size_t(p.padded))
      throw Error("pad_rows: expert " + std::to_string(e) + " has " + std::to_string(p.offset[e + 1] - p.offset[e]) +
                  " rows, more than the " + std::to_string(p.padded) + " of its padded block");
}

void pad_rows_cpu(const RowPadding& p, const void* packed, void* padded, PadMove move) {
  const std::size_t row = std::size_t(p.width) * dtype_size(p.dtype);
  auto* pk = static_cast<char*>(const_cast<void*>(packed));
  auto* pd = static_cast<char*>(padded);
  for (int e = 0; e < p.experts(); ++e) {
    const std::size_t rows = p.offset[e + 1] - p.offset[e];
    char* block = pd + std::size_t(e) * p.padded * row;
    if (move == PadMove::to_packed) {
      std::memcpy(pk + p.offset[e] * row, block, rows * row);
      continue;
    }
    if (move == PadMove::to_padded) std::memcpy(block, pk + p.offset[e] * row, rows * row);
    std::memset(block + rows * row, 0, (std::size_t(p.padded) - rows) * row);
  }
}

void pad_rows(const Exec& ex, const RowPadding& p, const void* packed, void* padded) {
  check_padding(p);
  if (ex.backend == Backend::cuda) return pad_rows_cuda(p, packed, padded, PadMove::to_padded, ex.stream);
  run_host(ex, "pad_rows", [p, packed, padded] { pad_rows_cpu(p, packed, padded, PadMove::to_padded); });
}

void unpad_rows(const Exec& ex, const RowPadding& p, const void* padded, void* packed) {
  check_padding(p);
  if (ex.backend == Backend::cuda)
    return pad_rows_cuda(p, const_cast<void*>(packed), const_cast<void*>(padded), PadMove::to_packed, ex.stream);
  run_host(ex, "unpad_rows", [p, packed, padded] { pad_rows_cpu(p, packed, const_cast<void*>(padded), PadMove::to_packed); });
}

void zero_padding_rows(const Exec& ex, const RowPadding& p, void* padded) {
  check_padding(p);
  bool any = false;
  for (int e = 0; e < p.experts(); ++e) any = any || p.offset[e + 1] - p.offset[e] < std::size_t(p.padded);
  if (!any) return;
  if (ex.backend == Backend::cuda) return pad_rows_cuda(p, nullptr, padded, PadMove::zero_padding, ex.stream);
  run_host(ex, "zero_padding_rows", [p, padded] { pad_rows_cpu(p, nullptr, padded, PadMove::zero_padding); });
}

#if !MOEBENCH_WITH_CUDA
void pad_rows_cuda(const RowPadding&, const void*, void*, PadMove, void*) { cuda_not_built("pad_rows"); }
#endif

}  // namespace moebench
