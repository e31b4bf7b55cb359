#include "kernels/gemm.h"
#include <cblas.h>
#include <cstdio>
#include <string>
#include "kernels/host_widen.h"

namespace moebench {

GemmArgs dense_gemm(bool trans_a, bool trans_b, int m, int n, int k, const void* a, const void* b, void* c,
                    DType dtype, float alpha, float beta) {
  GemmArgs g;
  g.trans_a = trans_a; g.trans_b = trans_b;
  g.m = m; g.n = n; g.k = k;
  g.alpha = alpha; g.beta = beta;
  g.a = a; g.lda = trans_a ? m : k;
  g.b = b; g.ldb = trans_b ? k : n;
  g.c = c; g.ldc = n;
  g.dtype = dtype;
  return g;
}

static void check_gemm(const GemmArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0)
    throw Error("gemm: negative size m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k));
  if (!is_float(g.dtype)) throw Error("gemm: dtype must be fp32, fp16 or bf16");
  if (g.c_dtype && *g.c_dtype != g.dtype && *g.c_dtype != DType::f32)
    throw Error("gemm: C in " + std::string(dtype_name(*g.c_dtype)) + " from " + std::string(dtype_name(g.dtype)) +
                " operands; allowed: C in the operands' dtype, or fp32");
}

void gemm_cpu(const GemmArgs& g) {
  check_gemm(g);
  if (g.m == 0 || g.n == 0) return;
  const DType ct = g.c_dtype.value_or(g.dtype);
  if (g.dtype != DType::f32 || ct != DType::f32) {  // 16-bit storage: sgemm on widened operands, C narrowed back
    const std::size_t ar = g.trans_a ? g.k : g.m, ac = g.trans_a ? g.m : g.k;
    const std::size_t br = g.trans_b ? g.n : g.k, bc = g.trans_b ? g.k : g.n;
    WidenedView a(g.a, g.dtype, ar, ac, g.lda, true), b(g.b, g.dtype, br, bc, g.ldb, true),
        c(g.c, ct, g.m, g.n, g.ldc, g.beta != 0.f);
    GemmArgs f = g;
    f.a = a.data();
    f.b = b.data();
    f.c = c.data();
    f.dtype = DType::f32;
    f.c_dtype.reset();
    gemm_cpu(f);
    c.narrow();
    return;
  }
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n,
              g.k, g.alpha, static_cast<const float*>(g.a), g.lda, static_cast<const float*>(g.b), g.ldb, g.beta,
              static_cast<float*>(g.c), g.ldc);
}

void set_cpu_blas_threads(int threads) { openblas_set_num_threads(threads); }
int cpu_blas_threads() { return openblas_get_num_threads(); }

std::string describe_gemm(const GemmArgs& g) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "\"m\": %d, \"n\": %d, \"k\": %d, \"trans_a\": %d, \"trans_b\": %d, \"beta\": %g, \"a\": \"%p\", "
                "\"b\": \"%p\", \"c\": \"%p\"",
                g.m, g.n, g.k, int(g.trans_a), int(g.trans_b), double(g.beta), g.a, g.b, static_cast<const void*>(g.c));
  return buf;
}

void gemm(const Exec& ex, const GemmArgs& g) {
  if (ex.backend == Backend::cpu) {
    check_gemm(g);
    return run_host(ex, "gemm", [g] { gemm_cpu(g); }, records_details(ex) ? describe_gemm(g) : std::string());
  }
  check_gemm(g);
  gemm_cuda(g, ex.stream, ex.blas, ex.tensor_cores);
}

#if !MOEBENCH_WITH_CUDA
void gemm_cuda(const GemmArgs&, void*, void*, bool) { cuda_not_built("gemm"); }
#endif

}  // namespace moebench
