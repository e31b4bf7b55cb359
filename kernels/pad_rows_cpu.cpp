#include <algorithm>
#include <cstring>
#include <string>
#include "kernels/pad_rows.h"

namespace moebench {

std::vector<std::size_t> row_offsets(const std::vector<int>& rows) {
  std::vector<std::size_t> offset(rows.size() + 1, 0);
  for (std::size_t e = 0; e < rows.size(); ++e) offset[e + 1] = offset[e] + std::size_t(rows[e]);
  return offset;
}

std::vector<std::size_t> padded_starts(const std::vector<std::size_t>& offset, int padded) {
  const int E = int(offset.size()) - 1;
  std::vector<std::size_t> start(std::max(E, 0) + 1);
  std::size_t overflow = std::size_t(std::max(E, 0)) * std::size_t(padded);
  for (int e = 0; e < E; ++e) {
    const std::size_t rows = offset[e + 1] - offset[e];
    start[e] = rows > std::size_t(padded) ? overflow : std::size_t(e) * padded;
    if (rows > std::size_t(padded)) overflow += rows;
  }
  start[std::max(E, 0)] = overflow;
  return start;
}

static void check_padding(const RowPadding& p) {
  if (p.offset.empty()) throw Error("pad_rows: no expert offsets");
  if (p.padded < 0) throw Error("pad_rows: a block of " + std::to_string(p.padded) + " rows");
  for (int e = 0; e < p.experts(); ++e)
    if (p.offset[e + 1] < p.offset[e])
      throw Error("pad_rows: expert " + std::to_string(e) + "'s offsets run backwards (" + std::to_string(p.offset[e]) +
                  " to " + std::to_string(p.offset[e + 1]) + ")");
}

void pad_rows_cpu(const RowPadding& p, const void* packed, void* padded, PadMove move) {
  const std::size_t row = std::size_t(p.width) * dtype_size(p.dtype);
  const std::vector<std::size_t> start = padded_starts(p.offset, p.padded);
  auto* pk = static_cast<char*>(const_cast<void*>(packed));
  auto* pd = static_cast<char*>(padded);
  for (int e = 0; e < p.experts(); ++e) {
    const std::size_t rows = p.rows(e), in_block = p.overflows(e) ? 0 : rows;
    char* block = pd + std::size_t(e) * p.padded * row;
    char* at = pd + start[e] * row;  // the block, or the overflow
    if (move == PadMove::to_packed) {
      std::memcpy(pk + p.offset[e] * row, at, rows * row);
      continue;
    }
    if (move == PadMove::to_padded) std::memcpy(at, pk + p.offset[e] * row, rows * row);
    std::memset(block + in_block * row, 0, (std::size_t(p.padded) - in_block) * row);
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
  bool any = false;  // a block with padding: an expert short of it, or one in the overflow
  for (int e = 0; e < p.experts(); ++e) any = any || p.rows(e) != std::size_t(p.padded);
  if (!any) return;
  if (ex.backend == Backend::cuda) return pad_rows_cuda(p, nullptr, padded, PadMove::zero_padding, ex.stream);
  run_host(ex, "zero_padding_rows", [p, padded] { pad_rows_cpu(p, nullptr, padded, PadMove::zero_padding); });
}

#if !MOEBENCH_WITH_CUDA
void pad_rows_cuda(const RowPadding&, const void*, void*, PadMove, void*) { cuda_not_built("pad_rows"); }
#endif

}  // namespace moebench
