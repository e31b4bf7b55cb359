// The experts' rows between their packed layout ([rows of expert 0][rows of expert 1]..., as the
// dispatchers deliver them) and a padded one, which one strided-batched GEMM takes
// (kernels/batched_gemm.h): E blocks of `padded` rows, expert e's rows at the start of block e and
// the rest zero -- unless it has more rows than a block: then its block is all padding and its
// rows lie, in order, in the overflow after the E blocks, experts in order, where a GEMM of their
// own takes them (a block the height of the busiest expert would multiply the work under skew).
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
  std::size_t rows(int e) const { return offset[e + 1] - offset[e]; }
  bool overflows(int e) const { return rows(e) > std::size_t(padded); }
};

// The packed layout's offsets of experts with `rows` rows each.
std::vector<std::size_t> row_offsets(const std::vector<int>& rows);
// Each expert's first row in the padded layout (its block's, or its place in the overflow), and the
// layout's rows at the end: experts * padded + the overflowing experts' rows.
std::vector<std::size_t> padded_starts(const std::vector<std::size_t>& offset, int padded);

// packed [offset.back(), width] -> padded [padded_starts().back(), width] (padding rows zeroed).
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
