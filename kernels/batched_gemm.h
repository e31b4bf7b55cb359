// A strided batch of GEMMs of one shape (the experts' rows padded to the busiest expert's), with
// an optional elementwise epilogue applied to the fp32 product before the one rounding to C:
//   gelu_aux: aux = AB (GeLU's input, stored in C's dtype and layout), C = GeLU(AB)
//   dgelu:    C = AB * GeLU'(aux)  (GeLU's gradient from the stored input)
// GeLU is the tanh approximation (kernels/gelu_math.h), as cuBLASLt's epilogues compute it.
// CPU: one sgemm per entry on widened operands, the epilogue in fp32. CUDA: one cublasLtMatmul
// with strided batch layouts and the GELU_AUX / DGELU epilogues; its aux leading dimension and
// batch stride (C's) must be multiples of 8. 16-bit operands with Exec::tensor_cores off run as
// pedantic GEMMs (kernels/gemm.h) with GeLU kernels after them.
#pragma once
#include <cstddef>
#include <string>
#include "kernels/gemm.h"

namespace moebench {

enum class Epilogue { none, gelu_aux, dgelu };

struct BatchedGemmArgs {
  GemmArgs g;  // entry 0, and every entry's shape, leading dimensions, alpha, beta and dtype
  int batch = 1;
  long long stride_a = 0, stride_b = 0, stride_c = 0;  // elements from one entry to the next
  Epilogue epilogue = Epilogue::none;                   // with beta 0 only
  void* aux = nullptr;                                  // ld g.ldc, batch stride stride_c
};

// `batch` GEMMs shaped as `entry` (entry 0's operands), each operand `stride_*` elements after
// the last one's; and one GEMM with an epilogue (a batch of one).
BatchedGemmArgs strided_batch(const GemmArgs& entry, int batch, long long stride_a, long long stride_b,
                              long long stride_c, Epilogue epilogue = Epilogue::none, void* aux = nullptr);
BatchedGemmArgs with_epilogue(const GemmArgs& g, Epilogue epilogue, void* aux);
// Whether `ex` runs an epilogue into a C of leading dimension `ldc` (cuBLASLt: multiples of 8).
inline bool epilogue_fits(const Exec& ex, int ldc) { return ex.backend == Backend::cpu || ldc % 8 == 0; }

void batched_gemm_cpu(const BatchedGemmArgs& b);
void batched_gemm_cuda(const BatchedGemmArgs& b, const Exec& ex);
void batched_gemm(const Exec& ex, const BatchedGemmArgs& b);
// How the CUDA backend has chosen its cuBLASLt algorithms in this process: the plans made (each a
// call of cuBLASLt's heuristic: one per bucket of shapes, and one per shape its bucket's algorithm
// does not fit), those whose algorithm was timed among the heuristic's candidates, the shapes that
// took their bucket's plan without a heuristic of their own, and the plans with a lone candidate,
// nothing to time (kernels/batched_gemm_cuda.cu).
struct BatchedGemmAlgoStats {
  std::size_t plans = 0, timed = 0, reused = 0, lone = 0;
};
BatchedGemmAlgoStats batched_gemm_algo_stats();
// Its shape, batch, epilogue, beta and operand addresses as a JSON object body (the timeline's).
std::string describe_batched_gemm(const BatchedGemmArgs& b);
const char* epilogue_name(Epilogue e);

}  // namespace moebench
