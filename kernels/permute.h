// Moving token rows between token order [T, h] and expert-major order [R, h]:
//   dispatch: rows[row_of[t, s]] = x[t]            (gather by expert; row_of < 0: not here)
//   combine:  out[t] (+)= sum_s weight[t, s] * rows[row_of[t, s]]   (weighted scatter back)
// and their backward passes. A row map may cover a slice of the slots only (the assignments to
// some experts, as one step of a FasterMoE-style exchange): combine then adds into out
// (accumulate), and combine backward leaves dweight alone for the slots it does not map
// (slice), so the slices together write each once. row_of maps each of a token's S slots to a row or -1 (dropped,
// or an expert on another rank). Rows hold `dtype`; weights are fp32; sums are fp32.
// dispatch with S = 1 is a row permutation.
#pragma once
#include <cstdint>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

struct RowMap {
  int tokens = 0, slots = 1, hidden = 0;
  const std::int32_t* row_of = nullptr;  // [tokens, slots]
};

// row_of[t, s] = base[group of t, expert] + position when both are >= 0, else -1
// (base -1: the expert is not on this rank; position -1: the assignment was dropped).
struct RowMapSource {
  int tokens = 0, slots = 1, experts = 0, groups = 1;
  const std::int32_t* expert = nullptr;    // [tokens, slots]
  const std::int32_t* position = nullptr;  // [tokens, slots]
  const std::int32_t* base = nullptr;      // [groups, experts]
};
void build_row_map_cpu(const RowMapSource& src, std::int32_t* row_of);
void build_row_map_cuda(const RowMapSource& src, std::int32_t* row_of, void* stream);
void build_row_map(const Exec& ex, const RowMapSource& src, std::int32_t* row_of);

void dispatch_rows_cpu(const RowMap& m, const float* x, float* rows);
void combine_rows_cpu(const RowMap& m, const float* rows, const float* weight, float* out, bool accumulate = false);
// drows[row] = weight * dout[t];  dweight[t, s] = <dout[t], rows[row]> (0 for slots without a
// row, or left as is with `slice`)
void combine_rows_backward_cpu(const RowMap& m, const float* dout, const float* rows, const float* weight,
                               float* drows, float* dweight, bool slice = false);
// dx[t] (+)= sum_s drows[row_of[t, s]]
void dispatch_rows_backward_cpu(const RowMap& m, const float* drows, float* dx, bool accumulate);

void dispatch_rows_cuda(const RowMap& m, const void* x, void* rows, DType t, void* stream);
void combine_rows_cuda(const RowMap& m, const void* rows, const float* weight, void* out, bool accumulate, DType t,
                       void* stream);
void combine_rows_backward_cuda(const RowMap& m, const void* dout, const void* rows, const float* weight, void* drows,
                                float* dweight, bool slice, DType t, void* stream);
void dispatch_rows_backward_cuda(const RowMap& m, const void* drows, void* dx, bool accumulate, DType t, void* stream);

void dispatch_rows(const Exec& ex, const RowMap& m, const void* x, void* rows, DType t);
void combine_rows(const Exec& ex, const RowMap& m, const void* rows, const float* weight, void* out, DType t,
                  bool accumulate = false);
void combine_rows_backward(const Exec& ex, const RowMap& m, const void* dout, const void* rows, const float* weight,
                           void* drows, float* dweight, DType t, bool slice = false);
void dispatch_rows_backward(const Exec& ex, const RowMap& m, const void* drows, void* dx, bool accumulate, DType t);

}  // namespace moebench
