// An fp32 matrix as bf16 parts that sum back to it: hi = bf16(w), lo = bf16(w - hi), lo2 =
// bf16(w - hi - lo), 24 bits of w in three parts. A product of a part with a bf16 value is exact
// in fp32, so one tensor-core GEMM over the parts laid side by side, accumulated in fp32, gives
// each part's product as an fp32 GEMM would, and summing the slices gives x w to fp32 accuracy:
// the MoE gate's logits from bf16 tokens without widening them, nor leaving the tensor cores.
#pragma once
#include <cstddef>
#include <cstdint>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

// Which part (0 hi, 1 lo, 2 lo2) each slice of the output holds, up to four slices.
struct Bf16Parts {
  int count = 0;
  int part[4] = {};
};

// dst [rows, parts.count * cols] (bf16): slice s of row r holds part parts.part[s] of src [rows, cols].
void split_bf16_cpu(const float* src, std::size_t rows, int cols, Bf16Parts parts, std::uint16_t* dst);
void split_bf16_cuda(const float* src, std::size_t rows, int cols, Bf16Parts parts, void* dst, void* stream);
void split_bf16(const Exec& ex, const float* src, std::size_t rows, int cols, Bf16Parts parts, void* dst);

// dst [rows, cols] = (src[:, 0:cols] + src[:, cols:2 cols]) + src[:, 2 cols:3 cols] (fp32): the
// three slices of a GEMM over three parts, summed in a fixed order.
void sum_split3_cpu(const float* src, std::size_t rows, int cols, float* dst);
void sum_split3_cuda(const float* src, std::size_t rows, int cols, float* dst, void* stream);
void sum_split3(const Exec& ex, const float* src, std::size_t rows, int cols, float* dst);

}  // namespace moebench
