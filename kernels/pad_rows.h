// The experts' rows between their packed layout ([rows of expert 0][rows of expert 1]..., as the
// dispatchers deliver them) and a padded one (expert e's rows at the start of block e of `padded`
// rows, the rest zero), which one strided-batched GEMM takes (kernels/batched_gemm.h).
// offset: each expert's first packed row, and the total at the end (host values).
#pragma once
#include <cstddef>
#include <vector>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

struct RowPadding {
  std::vector<std::size_t> offset;  // experts + 1
  int padded = 0;                   // rows per expert block: at least the busiest expert's
  int width = 0;                    // elements per row
  DType dtype = DType::f32;
  int experts() const { return int(offset.size()) - 1; }
};

// packed [offset.back(), width] -> padded [experts, padded, width] (padding rows zeroed).
void pad_rows(const Exec& ex, const RowPadding& p, const void* packed, void* padded);
// padded -> packed (padding rows dropped).
void unpad_rows(const Exec& ex, const RowPadding& p, const void* padded, void* packed);
// Zeroes the padding rows of a padded buffer whose expert rows were written there directly (a
// dispatcher's row map into the blocks); nothing runs when no block has padding.
void zero_padding_rows(const Exec& ex, const RowPadding& p, void* padded);

enum class PadMove { to_padded, to_packed, zero_padding };
void pad_rows_cpu(const RowPadding& p, const void* packed, void* padded, PadMove move);
void pad_rows_cuda(const RowPadding& p, const void* packed, void* padded, PadMove move, void* stream);

}  // namespace moebench
