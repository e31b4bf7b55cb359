#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>
#include "kernels/batched_gemm.h"
#include "kernels/cublas_library.h"
#include "kernels/cublas_check.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"

namespace moebench {

namespace {
template <class T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  MOEBENCH_CUBLAS_CHECK(cublas().lt_matmul_desc_set_attribute(d, attr, &v, sizeof v));
}

// A column-major rows x cols matrix, ld apart, `batch` of them `stride` elements apart.
cublasLtMatrixLayout_t layout(cudaDataType_t t, std::uint64_t rows, std::uint64_t cols, std::int64_t ld, int batch,
                              long long stride) {
  cublasLtMatrixLayout_t l = nullptr;
  MOEBENCH_CUBLAS_CHECK(cublas().lt_matrix_layout_create(&l, t, rows, cols, ld));
  const std::int32_t count = batch;
  const std::int64_t offset = stride;
  MOEBENCH_CUBLAS_CHECK(
      cublas().lt_matrix_layout_set_attribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  MOEBENCH_CUBLAS_CHECK(
      cublas().lt_matrix_layout_set_attribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof offset));
  return l;
}

// The same layout given another shape of its bucket (the batch count is the bucket's own).
void reshape(cublasLtMatrixLayout_t l, std::uint64_t rows, std::uint64_t cols, std::int64_t ld, long long stride) {
  const std::int64_t offset = stride;
  MOEBENCH_CUBLAS_CHECK(cublas().lt_matrix_layout_set_attribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows));
  MOEBENCH_CUBLAS_CHECK(cublas().lt_matrix_layout_set_attribute(l, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols));
  MOEBENCH_CUBLAS_CHECK(cublas().lt_matrix_layout_set_attribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld));
  MOEBENCH_CUBLAS_CHECK(
      cublas().lt_matrix_layout_set_attribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof offset));
}

// A bucket's descriptors, the heuristic's candidate algorithms (best predicted first, for the
// first shape met) and the one it runs. A layer makes the same few calls every step, but routing
// moves the experts' row counts from step to step, and in a training step each MoE layer meets
// counts it has not met before. So plans are kept per bucket of shapes (each extent rounded up
// by bucketed(), with the handle and the operands' alignments, which the heuristic's choice
// depends on): a call of a known bucket sets its exact extents on the descriptors, and a shape
// met for the first time costs cuBLASLt's check of the bucket's algorithm, not the heuristic.
// A shape the algorithm does not fit gets a plan of its own.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulAlgo_t> candidates;
  bool chosen = false;                      // algo timed among the candidates, or the only one
  std::string shape;                        // shape_key() of the extents the descriptors hold
  std::unordered_set<std::string> fitted;   // shapes cuBLASLt accepts algo for
};

// The heuristic's first pick can be far from the best of its own candidates: on the padded
// experts' activation-gradient GEMMs (a transposed weight, ~100-300 rows per expert) it picked
// tiles that ran at well under half the forward's rate. So a plan's first call that may run
// more than once (beta 0, nothing it writes read by it, no graph capture or kernel log open)
// times each candidate on its own operands and keeps the fastest; the real call follows and
// overwrites what the trials wrote. The choice is the bucket's: a run times a few buckets, not
// every step's row counts.
constexpr int kCandidates = 8, kTrialRuns = 2;
// Buckets are kBucketRows wide up to 256, then four to an octave: shapes within a quarter of each
// other share an algorithm, and the counts a training run meets fill few buckets.
constexpr long long kBucketRows = 64;

// An operand's alignment in bytes: the largest power of two, up to 256, dividing its address.
// cuBLASLt's heuristic assumes 256-byte operands unless told otherwise, and an algorithm picked
// for them may refuse (or misread) an operand inside a wider row, e.g. a panel of Q's rows.
// In a strided batch every entry's address counts: the base's and the stride's alignments both.
std::uint32_t alignment(const void* p, long long stride_bytes = 0) {
  const auto a = reinterpret_cast<std::uintptr_t>(p) | std::uintptr_t(stride_bytes);
  return a == 0 ? 256u : std::uint32_t(std::min<std::uintptr_t>(a & (~a + 1), 256));
}

// A call's shape: everything its descriptors and the heuristic's choice depend on but the
// operands' alignments.
std::string shape_key(const BatchedGemmArgs& args, const Exec& ex) {
  const GemmArgs& g = args.g;
  char buf[320];
  std::snprintf(buf, sizeof buf, "%p|%d|%d|%d%d|%d,%d,%d|%d,%d,%d|%d|%lld,%lld,%lld|%d|%zu|", ex.blas_lt, int(g.dtype),
                int(ex.tensor_cores), int(g.trans_a), int(g.trans_b), g.m, g.n, g.k, g.lda, g.ldb, g.ldc, args.batch,
                args.stride_a, args.stride_b, args.stride_c, int(args.epilogue), ex.workspace_bytes);
  return buf;
}

std::string alignment_key(const BatchedGemmArgs& args) {
  const GemmArgs& g = args.g;
  const long long es = (long long)dtype_size(g.dtype);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%u,%u,%u,%u", alignment(g.a, args.stride_a * es), alignment(g.b, args.stride_b * es),
                alignment(g.c, args.stride_c * es), alignment(args.aux, args.stride_c * es));
  return buf;
}

long long bucketed(long long v) {
  long long octave = 1;
  while (octave * 2 <= v) octave *= 2;
  const long long step = std::max(kBucketRows, octave / 4);
  return (v + step - 1) / step * step;
}

// The shapes whose extents and leading dimensions round up alike, whatever their batch strides
// (which follow the row count); the batch count and the alignments stay the call's own.
std::string bucket_key(const BatchedGemmArgs& args, const Exec& ex) {
  BatchedGemmArgs b = args;
  GemmArgs& g = b.g;
  g.m = int(bucketed(g.m)), g.n = int(bucketed(g.n)), g.k = int(bucketed(g.k));
  g.lda = int(bucketed(g.lda)), g.ldb = int(bucketed(g.ldb)), g.ldc = int(bucketed(g.ldc));
  b.stride_a = b.stride_b = b.stride_c = 0;
  return shape_key(b, ex) + alignment_key(args);
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
  MOEBENCH_CUBLAS_CHECK(cublas().lt_matmul_desc_create(&p->op, compute, CUDA_R_32F));
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
  MOEBENCH_CUBLAS_CHECK(cublas().lt_matmul_preference_create(&preference));
  const std::uint64_t workspace = ex.workspace_bytes;
  cublasStatus_t set_status = cublas().lt_matmul_preference_set_attribute(
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
      set_status = cublas().lt_matmul_preference_set_attribute(preference, attr, &bytes, sizeof bytes);
  cublasLtMatmulHeuristicResult_t found_algos[kCandidates] = {};
  int found = 0;
  const cublasStatus_t heuristic =
      set_status != CUBLAS_STATUS_SUCCESS
          ? set_status
          : cublas().lt_matmul_algo_get_heuristic(static_cast<cublasLtHandle_t>(ex.blas_lt), p->op, p->a, p->b, p->c,
                                                  p->c, preference, kCandidates, found_algos, &found);
  cublas().lt_matmul_preference_destroy(preference);
  MOEBENCH_CUBLAS_CHECK(heuristic);
  for (int i = 0; i < found; ++i)
    if (found_algos[i].state == CUBLAS_STATUS_SUCCESS) p->candidates.push_back(found_algos[i].algo);
  if (p->candidates.empty())
    throw Error("batched_gemm: cuBLASLt has no algorithm for " + describe_batched_gemm(args) + " in " +
                std::string(dtype_name(g.dtype)));
  p->algo = p->candidates.front();
  return p.release();  // kept for the process's life (see plan_for)
}

// The plan's descriptors given the call's extents, leading dimensions and batch strides (its
// bucket's other fields are the call's already), as make_plan lays them out.
void reshape_to(Plan& p, const BatchedGemmArgs& args, const std::string& shape) {
  if (p.shape == shape) return;
  const GemmArgs& g = args.g;
  reshape(p.a, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb, args.stride_b);
  reshape(p.b, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda, args.stride_a);
  reshape(p.c, g.n, g.m, g.ldc, args.stride_c);
  if (args.epilogue != Epilogue::none) {
    set(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, std::int64_t(g.ldc));
    set(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, std::int64_t(args.stride_c));
  }
  p.shape = shape;
}

// Whether cuBLASLt runs `algo` on the plan's exact descriptors within the workspace.
bool fits(const Plan& p, const cublasLtMatmulAlgo_t& algo, const Exec& ex) {
  cublasLtMatmulHeuristicResult_t check{};
  return cublas().lt_matmul_algo_check(static_cast<cublasLtHandle_t>(ex.blas_lt), p.op, p.a, p.b, p.c, p.c, &algo,
                                       &check) == CUBLAS_STATUS_SUCCESS &&
         check.workspaceSize <= ex.workspace_bytes;
}

cublasStatus_t run(const Plan& p, const cublasLtMatmulAlgo_t& algo, const BatchedGemmArgs& args, const Exec& ex) {
  const GemmArgs& g = args.g;
  return cublas().lt_matmul(static_cast<cublasLtHandle_t>(ex.blas_lt), p.op, &g.alpha, g.b, p.a, g.a, p.b, &g.beta, g.c,
                            p.c, g.c, p.c, &algo, ex.workspace, ex.workspace_bytes,
                            static_cast<cudaStream_t>(ex.stream));
}

// The bytes an operand's `batch` entries span: rows x cols elements, ld apart, stride apart.
std::pair<const char*, const char*> span(const void* p, long long rows, long long cols, long long ld, int batch,
                                         long long stride, std::size_t es) {
  const char* begin = static_cast<const char*>(p);
  return {begin, begin + ((batch - 1) * stride + (rows - 1) * ld + cols) * (long long)es};
}

// Whether a second run of the call computes what the first did: beta 0, and nothing it writes
// (C, GELU_AUX's aux) is something it reads (A, B, DGELU's aux).
bool reruns_alike(const BatchedGemmArgs& args) {
  const GemmArgs& g = args.g;
  if (g.beta != 0.f) return false;
  const std::size_t es = dtype_size(g.dtype);
  using Span = std::pair<const char*, const char*>;
  const Span c = span(g.c, g.m, g.n, g.ldc, args.batch, args.stride_c, es);
  std::vector<Span> writes{c}, reads{span(g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, args.batch, args.stride_a, es),
                                     span(g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, args.batch, args.stride_b, es)};
  if (args.aux) {
    const Span aux = span(args.aux, g.m, g.n, g.ldc, args.batch, args.stride_c, es);
    (args.epilogue == Epilogue::gelu_aux ? writes : reads).push_back(aux);
  }
  for (const Span& w : writes)
    for (const Span& r : reads)
      if (w.first < r.second && r.first < w.second) return false;
  return true;
}

bool may_time(const BatchedGemmArgs& args, const Exec& ex) {
  if (ex.trials_allowed && !ex.trials_allowed()) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  MOEBENCH_CUDA_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(ex.stream), &capture));
  return capture == cudaStreamCaptureStatusNone && reruns_alike(args);
}

// Each candidate once to warm it, then kTrialRuns times between two events; the fastest is kept.
// A candidate cuBLASLt refuses at launch is passed over.
void time_candidates(Plan& p, const BatchedGemmArgs& args, const Exec& ex) {
  const auto s = static_cast<cudaStream_t>(ex.stream);
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Events() {
      if (start) cudaEventDestroy(start);
      if (stop) cudaEventDestroy(stop);
    }
  } events;
  MOEBENCH_CUDA_CHECK(cudaEventCreate(&events.start));
  MOEBENCH_CUDA_CHECK(cudaEventCreate(&events.stop));
  const cudaEvent_t start = events.start, stop = events.stop;
  float best_ms = 0.f;
  bool any = false;
  for (const cublasLtMatmulAlgo_t& algo : p.candidates) {
    if (run(p, algo, args, ex) != CUBLAS_STATUS_SUCCESS) continue;
    MOEBENCH_CUDA_CHECK(cudaEventRecord(start, s));
    for (int i = 0; i < kTrialRuns; ++i) MOEBENCH_CUBLAS_CHECK(run(p, algo, args, ex));
    MOEBENCH_CUDA_CHECK(cudaEventRecord(stop, s));
    // The stream's earlier work (a dispatch's all-to-all) may wait on a peer: the runtime's wait.
    if (ex.wait_event)
      ex.wait_event(stop);
    else
      MOEBENCH_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    MOEBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (!any || ms < best_ms) best_ms = ms, p.algo = algo, any = true;
  }
}

struct Plans {
  std::unordered_map<std::string, Plan*> by_bucket;  // bucket_key()
  std::unordered_map<std::string, Plan*> by_shape;   // shape and alignments: shapes their bucket's algorithm does not fit
  BatchedGemmAlgoStats stats;
};

// Plans live as long as the process: destroying descriptors at exit would race the library's own
// teardown. There is one per bucket a run meets. The caller holds plans_mutex().
Plans& plans() {
  static auto* all = new Plans();
  return *all;
}
std::mutex& plans_mutex() {
  static std::mutex m;
  return m;
}

Plan* new_plan(const BatchedGemmArgs& args, const Exec& ex, const std::string& shape) {
  Plans& all = plans();
  Plan* p = make_plan(args, ex);
  ++all.stats.plans;
  p->shape = shape;
  p->fitted.insert(shape);
  p->chosen = p->candidates.size() == 1;
  all.stats.lone += p->chosen;
  return p;
}

// The call's plan, its descriptors holding the call's shape.
Plan& plan_for(const BatchedGemmArgs& args, const Exec& ex) {
  Plans& all = plans();
  const std::string bucket = bucket_key(args, ex), shape = shape_key(args, ex);
  auto it = all.by_bucket.find(bucket);
  if (it == all.by_bucket.end()) return *all.by_bucket.emplace(bucket, new_plan(args, ex, shape)).first->second;
  Plan& p = *it->second;
  if (!p.fitted.count(shape)) {
    const std::string key = shape + alignment_key(args);
    if (auto own = all.by_shape.find(key); own != all.by_shape.end()) return *own->second;
    reshape_to(p, args, shape);
    if (!fits(p, p.algo, ex)) return *all.by_shape.emplace(key, new_plan(args, ex, shape)).first->second;
    p.fitted.insert(shape);
    ++all.stats.reused;
  }
  reshape_to(p, args, shape);
  return p;
}

// The plan's algorithm timed now where it has not been chosen and the call allows it; the shapes
// it was checked for before are checked again for the new one.
void choose_algorithm(Plan& p, const BatchedGemmArgs& args, const Exec& ex) {
  if (p.chosen || !may_time(args, ex)) return;
  time_candidates(p, args, ex);
  p.chosen = true;
  p.fitted = {p.shape};
  ++plans().stats.timed;
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
  // A plan is shared by every call of its bucket; only this host thread's call reshapes and reads
  // it now (cuBLASLt copies the descriptors' attributes when the call is enqueued).
  std::lock_guard<std::mutex> lock(plans_mutex());
  Plan& p = plan_for(args, ex);
  if (args.epilogue != Epilogue::none) set(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, args.aux);
  choose_algorithm(p, args, ex);
  MOEBENCH_CUBLAS_CHECK(run(p, p.algo, args, ex));
}

BatchedGemmAlgoStats batched_gemm_algo_stats() {
  std::lock_guard<std::mutex> lock(plans_mutex());
  return plans().stats;
}

}  // namespace moebench
