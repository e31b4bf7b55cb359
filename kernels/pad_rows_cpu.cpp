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

void pad_rows_cpu(const RowPadding& p, const void* packed, void* padded, bool to_padded) {
  const std::size_t row = std::size_t(p.width) * dtype_size(p.dtype);
  auto* pk = static_cast<char*>(const_cast<void*>(packed));
  auto* pd = static_cast<char*>(padded);
  for (int e = 0; e < p.experts(); ++e) {
    const std::size_t rows = p.offset[e + 1] - p.offset[e];
    char* block = pd + std::size_t(e) * p.padded * row;
    char* mine = pk + p.offset[e] * row;
    if (!to_padded) {
      std::memcpy(mine, block, rows * row);
      continue;
    }
    std::memcpy(block, mine, rows * row);
    std::memset(block + rows * row, 0, (std::size_t(p.padded) - rows) * row);
  }
}

void pad_rows(const Exec& ex, const RowPadding& p, const void* packed, void* padded) {
  check_padding(p);
  if (ex.backend == Backend::cuda) return pad_rows_cuda(p, packed, padded, true, ex.stream);
  run_host(ex, "pad_rows", [p, packed, padded] { pad_rows_cpu(p, packed, padded, true); });
}

void unpad_rows(const Exec& ex, const RowPadding& p, const void* padded, void* packed) {
  check_padding(p);
  if (ex.backend == Backend::cuda) return pad_rows_cuda(p, const_cast<void*>(packed), const_cast<void*>(padded), false, ex.stream);
  run_host(ex, "unpad_rows", [p, packed, padded] { pad_rows_cpu(p, packed, const_cast<void*>(padded), false); });
}

#if !MOEBENCH_WITH_CUDA
void pad_rows_cuda(const RowPadding&, const void*, void*, bool, void*) { cuda_not_built("pad_rows"); }
#endif

}  // namespace moebench
