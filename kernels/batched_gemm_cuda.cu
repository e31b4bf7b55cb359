#include <cublasLt.h>
#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include "kernels/batched_gemm.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

namespace {
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

// A call's descriptors and the algorithm cuBLASLt's heuristic picked for them. A layer makes the
// same few calls every step, so plans are kept per shape (and handle, and operand alignment,
// which the heuristic's choice depends on): a step pays for the descriptors and the heuristic
// once, not at every GEMM. Only the aux pointer changes between calls.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// An operand's alignment in bytes: the largest power of two, up to 256, dividing its address.
// cuBLASLt's heuristic assumes 256-byte operands unless told otherwise, and an algorithm picked
// for them may refuse (or misread) an operand inside a wider row, e.g. a panel of Q's rows.
// In a strided batch every entry's address counts: the base's and the stride's alignments both.
std::uint32_t alignment(const void* p, long long stride_bytes = 0) {
  const auto a = reinterpret_cast<std::uintptr_t>(p) | std::uintptr_t(stride_bytes);
  return a == 0 ? 256u : std::uint32_t(std::min<std::uintptr_t>(a & (~a + 1), 256));
}

std::string plan_key(const BatchedGemmArgs& args, const Exec& ex) {
  const GemmArgs& g = args.g;
  char buf[384];
  std::snprintf(buf, sizeof buf, "%p|%d|%d|%d%d|%d,%d,%d|%d,%d,%d|%d|%lld,%lld,%lld|%d|%zu|%u,%u,%u,%u", ex.blas_lt,
                int(g.dtype), int(ex.tensor_cores), int(g.trans_a), int(g.trans_b), g.m, g.n, g.k, g.lda, g.ldb, g.ldc,
                args.batch, args.stride_a, args.stride_b, args.stride_c, int(args.epilogue), ex.workspace_bytes,
                alignment(g.a), alignment(g.b), alignment(g.c), alignment(args.aux));
  return buf;
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's A is our B and its
// B is our A, as in gemm_cuda. The epilogue is elementwise, so the swap leaves it alone; its aux
// matrix has C's layout.
Plan* make_plan(const BatchedGemmArgs& args, const Exec& ex) {
  const GemmArgs& g = args.g;
  const cudaDataType_t t = cuda::data_type(g.dtype);
  const cublasComputeType_t compute =
      g.dtype == DType::f32 ? (ex.tensor_cores ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F) : CUBLAS_COMPUTE_32F;
  auto p = std::make_unique<Plan>();
  MOEBENCH_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, compute, CUDA_R_32F));
  set(p->op, CUBLASLT_MATMUL_DESC_TRANSA, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  set(p->op, CUBLASLT_MATMUL_DESC_TRANSB, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (args.epilogue != Epilogue::none) {
    set(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
        args.epilogue == Epilogue::gelu_aux ? CUBLASLT_EPILOGUE_GELU_AUX : CUBLASLT_EPILOGUE_DGELU);
    set(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, args.aux);
    set(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, std::int64_t(g.ldc));
    set(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, std::int64_t(args.stride_c));
  }
  // Column-major views: our B (k x n row-major, or n x k transposed) is cuBLASLt's A, and so on.
  p->a = layout(t, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb, args.batch, args.stride_b);
  p->b = layout(t, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda, args.batch, args.stride_a);
  p->c = layout(t, g.n, g.m, g.ldc, args.batch, args.stride_c);
  cublasLtMatmulPreference_t preference = nullptr;
  MOEBENCH_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const std::uint64_t workspace = ex.workspace_bytes;
  cublasStatus_t set_status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  // cuBLASLt's A is our B, its B our A (above); C and D are our C.
  const long long es = (long long)dtype_size(g.dtype);
  const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> operands[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(g.b, args.stride_b * es)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(g.a, args.stride_a * es)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(g.c, args.stride_c * es)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(g.c, args.stride_c * es)}};
  for (const auto& [attr, bytes] : operands)
    if (set_status == CUBLAS_STATUS_SUCCESS)
      set_status = cublasLtMatmulPreferenceSetAttribute(preference, attr, &bytes, sizeof bytes);
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  const cublasStatus_t heuristic =
      set_status != CUBLAS_STATUS_SUCCESS
          ? set_status
          : cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(ex.blas_lt), p->op, p->a, p->b, p->c, p->c,
                                           preference, 1, &best, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  MOEBENCH_CUBLAS_CHECK(heuristic);
  if (found == 0)
    throw Error("batched_gemm: cuBLASLt has no algorithm for " + describe_batched_gemm(args) + " in " +
                std::string(dtype_name(g.dtype)));
  p->algo = best.algo;
  return p.release();  // kept for the process's life (see plan_for)
}

// Plans live as long as the process: destroying descriptors at exit would race the library's own
// teardown, and there are a few dozen of them.
Plan& plan_for(const BatchedGemmArgs& args, const Exec& ex) {
  static std::mutex mutex;
  static auto* plans = new std::unordered_map<std::string, Plan*>();
  const std::string key = plan_key(args, ex);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = plans->find(key);
  if (it == plans->end()) it = plans->emplace(key, make_plan(args, ex)).first;
  return *it->second;
}
}  // namespace

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
  if (args.epilogue != Epilogue::none && (g.ldc % 8 != 0 || args.stride_c % 8 != 0))
    throw Error("batched_gemm: the " + std::string(epilogue_name(args.epilogue)) + " epilogue needs C's leading dimension (" +
                std::to_string(g.ldc) + ") and batch stride (" + std::to_string(args.stride_c) + ") in multiples of 8");
  Plan& p = plan_for(args, ex);
  // The plan is shared by every call of its shape; only this host thread's call reads it now
  // (cuBLASLt copies the descriptor's attributes when the call is enqueued).
  static std::mutex call;
  std::lock_guard<std::mutex> lock(call);
  if (args.epilogue != Epilogue::none) set(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, args.aux);
  MOEBENCH_CUBLAS_CHECK(cublasLtMatmul(static_cast<cublasLtHandle_t>(ex.blas_lt), p.op, &g.alpha, g.b, p.a, g.a, p.b,
                                       &g.beta, g.c, p.c, g.c, p.c, &p.algo, ex.workspace, ex.workspace_bytes, s));
}

}  // namespace moebench
