#include "kernels/cublas_check.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/gemm.h"

namespace moebench {

// fp32 operands without tensor cores: plain fp32 (the default math mode never turns on TF32), which
// is as exact as the pedantic type without its slower kernels. 16-bit operands without tensor
// cores need the pedantic type: it is the only one that keeps them off the tensor cores.
static cublasComputeType_t gemm_compute_type(DType t, bool tensor_cores) {
  if (t == DType::f32) return tensor_cores ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  return tensor_cores ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
void gemm_cuda(const GemmArgs& g, void* stream, void* blas, bool tensor_cores) {
  if (g.m == 0 || g.n == 0) return;
  auto handle = static_cast<cublasHandle_t>(blas);
  if (!handle) throw Error("gemm: the CUDA backend needs a cuBLAS handle");
  (void)stream;  // the handle is bound to its stream once, when the device creates both
  const cublasComputeType_t compute = gemm_compute_type(g.dtype, tensor_cores);
  const cudaDataType_t t = cuda::data_type(g.dtype), ct = cuda::data_type(g.c_dtype.value_or(g.dtype));
  MOEBENCH_CUBLAS_CHECK(cublas().gemm_ex(handle, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     g.n, g.m, g.k, &g.alpha, g.b, t, g.ldb, g.a, t, g.lda, &g.beta, g.c, ct, g.ldc,
                                     compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace moebench
