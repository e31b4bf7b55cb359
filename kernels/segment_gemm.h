// Grouped GEMMs over segments of packed rows whose bounds exist only on the device: segment e is
// rows [offset[e], offset[e + 1]) of the packed operands, offset written by an earlier kernel
// (kernels/segment_offsets.h). The experts' GEMMs then need no row counts on the host: nothing
// waits for the gate, and a graph captured once serves every routing. Two forms:
//   rows:    C[r] = A[r] op(B_e) for every row r of segment e -- A [R, k] and C [R, n] packed,
//            B_e at b + e * stride_b is [k, n], or [n, k] with trans_b -- with an epilogue of
//            kernels/batched_gemm.h (gelu_aux, dgelu; aux [R, n] packed as C);
//   weights: C_e = A_e^T B_e + beta C_e, with A_e, B_e the segment's rows of A [R, m] and B [R, n]
//            and C_e [m, n] at c + e * stride_c. An empty segment leaves beta C_e; beta is 0 or 1,
//            so the first accumulation writes without reading.
// Rows at or past offset[segments] are neither read nor written; `bound` is the rows the packed
// operands hold, and the bounds are clamped to it.
// CPU: one sgemm per segment on widened operands (batched_gemm_cpu), the bounds read when the op
// runs. CUDA: one launch per call, tensor-core tiles with fp32 accumulators and the epilogue
// applied before the one rounding; 16-bit operands whose widths are multiples of 8 (see
// segment_gemm_unsupported).
#pragma once
#include <cstdint>
#include <string>
#include "kernels/batched_gemm.h"

namespace moebench {

enum class SegmentForm { rows, weights };

struct SegmentGemmArgs {
  SegmentForm form = SegmentForm::rows;
  int segments = 0;
  const std::int32_t* offset = nullptr;  // [segments + 1] on the device
  std::size_t bound = 0;                 // rows of the packed operands
  int m = 0, n = 0, k = 0;               // rows: n and k (m is the segment's); weights: m and n
  bool trans_b = false;                  // rows form
  float beta = 0.f;                      // weights form: 0 or 1
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  long long stride_b = 0;  // rows form: elements from B_e to B_{e+1}
  long long stride_c = 0;  // weights form: elements from C_e to C_{e+1}
  Epilogue epilogue = Epilogue::none;  // rows form
  void* aux = nullptr;
  DType dtype = DType::f32;
};

// Why `backend` cannot run segment GEMMs of `dtype` whose widths are `widths` (every k, n, m the
// caller will pass), or empty when it can.
std::string segment_gemm_unsupported(Backend backend, DType dtype, std::initializer_list<int> widths);

void segment_gemm(const Exec& ex, const SegmentGemmArgs& g);
void segment_gemm_cpu(const SegmentGemmArgs& g);
void segment_gemm_cuda(const SegmentGemmArgs& g, void* stream);
// Its form, widths, segments, epilogue, beta and operand addresses as a JSON object body.
std::string describe_segment_gemm(const SegmentGemmArgs& g);

}  // namespace moebench
