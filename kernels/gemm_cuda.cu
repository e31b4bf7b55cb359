#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/gemm.h"

namespace moebench {

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
void gemm_cuda(const GemmArgs& g, void* stream, void* blas, bool tensor_cores) {
  if (g.m == 0 || g.n == 0) return;
  auto handle = static_cast<cublasHandle_t>(blas);
  if (!handle) throw Error("gemm: the CUDA backend needs a cuBLAS handle");
  MOEBENCH_CUBLAS_CHECK(cublasSetStream(handle, static_cast<cudaStream_t>(stream)));
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F_PEDANTIC;
  if (tensor_cores) compute = g.dtype == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cudaDataType_t t = cuda::data_type(g.dtype);
  MOEBENCH_CUBLAS_CHECK(cublasGemmEx(handle, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     g.n, g.m, g.k, &g.alpha, g.b, t, g.ldb, g.a, t, g.lda, &g.beta, g.c, t, g.ldc,
                                     compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace moebench
