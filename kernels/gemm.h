// GEMM, row-major: C = alpha * op(A) * op(B) + beta * C, with op(X) = X or X^T.
// CPU: OpenBLAS sgemm (fp32; 16-bit operands widened, kernels/host_widen.h). CUDA: cublasGemmEx in fp32/fp16/bf16 with fp32 accumulation
// (C in A and B's dtype, or fp32 from 16-bit A and B: GemmArgs::c_dtype);
// Exec::tensor_cores selects tensor-core math (TF32 for fp32 operands) or none: plain fp32 for fp32
// operands, pedantic fp32 for 16-bit ones. The cuBLAS handle comes bound to the Exec's stream.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;           // C is m x n, op(A) is m x k, op(B) is k x n
  float alpha = 1.f, beta = 0.f;
  const void* a = nullptr; int lda = 0;
  const void* b = nullptr; int ldb = 0;
  void* c = nullptr; int ldc = 0;
  DType dtype = DType::f32;           // of A, B and C
  // C's where it is not `dtype`: fp32 from 16-bit A and B (products exact, sums in fp32).
  std::optional<DType> c_dtype;
};

// Leading dimensions of dense row-major operands.
GemmArgs dense_gemm(bool trans_a, bool trans_b, int m, int n, int k, const void* a, const void* b, void* c,
                    DType dtype = DType::f32, float alpha = 1.f, float beta = 0.f);

void gemm_cpu(const GemmArgs& g);
void gemm_cuda(const GemmArgs& g, void* stream, void* blas, bool tensor_cores);
void gemm(const Exec& ex, const GemmArgs& g);

// Its shape, transposes and operand addresses as a JSON object body (the runtime's timeline
// records it with the op: which buffer a GEMM wrote tells a weight gradient from an activation).
std::string describe_gemm(const GemmArgs& g);

inline double gemm_flops(int m, int n, int k) { return 2.0 * m * n * static_cast<double>(k); }

// Threads one CPU GEMM may use (OpenBLAS's pool). A GEMM runs on the thread of the stream it is
// enqueued on and fans out to these: ranks x busy streams x BLAS threads should not exceed the
// cores, so with several streams computing at once 1 is right.
void set_cpu_blas_threads(int threads);
int cpu_blas_threads();

}  // namespace moebench
