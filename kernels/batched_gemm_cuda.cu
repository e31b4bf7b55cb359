#include <cublasLt.h>
#include <cstdint>
#include <memory>
#include "kernels/batched_gemm.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

namespace {
// The descriptors of one call, destroyed with it.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~LtDescriptors() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    for (auto* l : {a, b, c})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

template <class T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  MOEBENCH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v));
}

// A column-major rows x cols matrix, ld apart, `batch` of them `stride` elements apart.
cublasLtMatrixLayout_t layout(cudaDataType_t t, std::uint64_t rows, std::uint64_t cols, std::int64_t ld, int batch,
                              long long stride) {
  cublasLtMatrixLayout_t l = nullptr;
  MOEBENCH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
  const std::int32_t count = batch;
  const std::int64_t offset = stride;
  MOEBENCH_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  MOEBENCH_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof offset));
  return l;
}
}  // namespace

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's A is our B and its
// B is our A, as in gemm_cuda. The epilogue is elementwise, so the swap leaves it alone; its aux
// matrix has C's layout.
void batched_gemm_cuda(const BatchedGemmArgs& args, const Exec& ex) {
  const GemmArgs& g = args.g;
  const auto s = static_cast<cudaStream_t>(ex.stream);
  const std::size_t es = dtype_size(g.dtype);
  if (g.k == 0) {  // C = beta C (beta 0 or 1, checked); a zero product's epilogue is zero
    if (g.beta != 0.f) return;
    for (void* out : {g.c, args.epilogue == Epilogue::gelu_aux ? args.aux : nullptr})
      for (int i = 0; out && i < args.batch; ++i)
        MOEBENCH_CUDA_CHECK(cudaMemset2DAsync(static_cast<char*>(out) + i * args.stride_c * es, std::size_t(g.ldc) * es, 0,
                                              std::size_t(g.n) * es, g.m, s));
    return;
  }
  if (!ex.blas_lt) throw Error("batched_gemm: the CUDA backend needs a cuBLASLt handle");
  const cudaDataType_t t = cuda::data_type(g.dtype);
  const cublasComputeType_t compute =
      g.dtype == DType::f32 ? (ex.tensor_cores ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F) : CUBLAS_COMPUTE_32F;
  LtDescriptors d;
  MOEBENCH_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.op, compute, CUDA_R_32F));
  set(d.op, CUBLASLT_MATMUL_DESC_TRANSA, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  set(d.op, CUBLASLT_MATMUL_DESC_TRANSB, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (args.epilogue != Epilogue::none) {
    if (g.ldc % 8 != 0 || args.stride_c % 8 != 0)
      throw Error("batched_gemm: the " + std::string(epilogue_name(args.epilogue)) + " epilogue needs C's leading dimension (" +
                  std::to_string(g.ldc) + ") and batch stride (" + std::to_string(args.stride_c) + ") in multiples of 8");
    set(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
        args.epilogue == Epilogue::gelu_aux ? CUBLASLT_EPILOGUE_GELU_AUX : CUBLASLT_EPILOGUE_DGELU);
    set(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, args.aux);
    set(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, std::int64_t(g.ldc));
    set(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, std::int64_t(args.stride_c));
  }
  // Column-major views: our B (k x n row-major, or n x k transposed) is cuBLASLt's A, and so on.
  d.a = layout(t, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb, args.batch, args.stride_b);
  d.b = layout(t, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda, args.batch, args.stride_a);
  d.c = layout(t, g.n, g.m, g.ldc, args.batch, args.stride_c);
  MOEBENCH_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&d.preference));
  const std::uint64_t workspace = ex.workspace_bytes;
  MOEBENCH_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &workspace, sizeof workspace));
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  const auto lt = static_cast<cublasLtHandle_t>(ex.blas_lt);
  MOEBENCH_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, d.op, d.a, d.b, d.c, d.c, d.preference, 1, &best, &found));
  if (found == 0)
    throw Error("batched_gemm: cuBLASLt has no algorithm for " + describe_batched_gemm(args) + " in " +
                std::string(dtype_name(g.dtype)));
  MOEBENCH_CUBLAS_CHECK(cublasLtMatmul(lt, d.op, &g.alpha, g.b, d.a, g.a, d.b, &g.beta, g.c, d.c, g.c, d.c, &best.algo,
                                       ex.workspace, ex.workspace_bytes, s));
}

}  // namespace moebench
