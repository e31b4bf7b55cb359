#include "kernels/batched_gemm.h"
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>
#include "kernels/gelu.h"
#include "kernels/host_widen.h"

namespace moebench {

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::none: return "none";
    case Epilogue::gelu_aux: return "gelu_aux";
    case Epilogue::dgelu: return "dgelu";
  }
  return "?";
}

BatchedGemmArgs strided_batch(const GemmArgs& entry, int batch, long long stride_a, long long stride_b,
                              long long stride_c, Epilogue epilogue, void* aux) {
  BatchedGemmArgs b;
  b.g = entry;
  b.batch = batch;
  b.stride_a = stride_a;
  b.stride_b = stride_b;
  b.stride_c = stride_c;
  b.epilogue = epilogue;
  b.aux = aux;
  return b;
}

BatchedGemmArgs with_epilogue(const GemmArgs& g, Epilogue epilogue, void* aux) {
  // One entry: the strides are never stepped over; C's is what cuBLASLt's aux batch stride takes.
  return strided_batch(g, 1, 0, 0, (long long)g.m * g.ldc, epilogue, aux);
}

static void check_batched(const BatchedGemmArgs& b) {
  if (b.batch < 0) throw Error("batched_gemm: negative batch " + std::to_string(b.batch));
  if (b.g.c_dtype && *b.g.c_dtype != b.g.dtype) throw Error("batched_gemm: C in the operands' dtype only");
  if (b.g.k == 0 && b.g.beta != 0.f && b.g.beta != 1.f) throw Error("batched_gemm: k = 0 supports beta 0 or 1");
  if (b.epilogue != Epilogue::none && (b.g.beta != 0.f || !b.aux))
    throw Error(std::string("batched_gemm: the ") + epilogue_name(b.epilogue) + " epilogue needs beta 0 and an aux matrix");
}

static void* at(const void* base, long long elements, DType t) {
  return static_cast<char*>(const_cast<void*>(base)) + elements * (long long)dtype_size(t);
}

// One entry with an epilogue: the product in fp32 (straight into C or aux when they are fp32),
// the epilogue row by row with the GeLU loops (vectorised), then the one rounding into C (and
// into aux for gelu_aux), as the GPU's epilogue does on its accumulators.
static void entry_with_epilogue(const GemmArgs& g, Epilogue e, void* aux) {
  const bool f32 = g.dtype == DType::f32;
  std::unique_ptr<float[]> scratch;  // 16-bit: the fp32 product
  float* product = nullptr;
  int ldp = g.ldc;
  if (f32) {
    product = static_cast<float*>(e == Epilogue::gelu_aux ? aux : g.c);
  } else {
    scratch.reset(new float[std::size_t(g.m) * g.n]);
    product = scratch.get();
    ldp = g.n;
  }
  const std::size_t ar = g.trans_a ? g.k : g.m, ac = g.trans_a ? g.m : g.k;
  const std::size_t br = g.trans_b ? g.n : g.k, bc = g.trans_b ? g.k : g.n;
  WidenedView a(g.a, g.dtype, ar, ac, g.lda, true), b(g.b, g.dtype, br, bc, g.ldb, true);
  GemmArgs f = g;
  f.a = a.data();
  f.b = b.data();
  f.c = product;
  f.ldc = ldp;
  f.beta = 0.f;
  f.dtype = DType::f32;
  gemm_cpu(f);
  WidenedView c(g.c, g.dtype, g.m, g.n, g.ldc, false), x(aux, g.dtype, g.m, g.n, g.ldc, e == Epilogue::dgelu);
  for (int i = 0; i < g.m; ++i) {
    const float* p = product + std::size_t(i) * ldp;
    float* c_row = c.data() + std::size_t(i) * g.ldc;
    float* x_row = x.data() + std::size_t(i) * g.ldc;
    if (e == Epilogue::gelu_aux) {
      if (!f32) std::memcpy(x_row, p, std::size_t(g.n) * sizeof(float));
      gelu_forward_cpu(p, c_row, std::size_t(g.n));
    } else {
      gelu_backward_cpu(x_row, p, c_row, std::size_t(g.n));  // C may be the product itself (fp32)
    }
  }
  c.narrow();
  if (e == Epilogue::gelu_aux) x.narrow();
}

void batched_gemm_cpu(const BatchedGemmArgs& b) {
  check_batched(b);
  for (int i = 0; i < b.batch; ++i) {
    GemmArgs g = b.g;
    g.a = at(b.g.a, i * b.stride_a, g.dtype);
    g.b = at(b.g.b, i * b.stride_b, g.dtype);
    g.c = at(b.g.c, i * b.stride_c, g.dtype);
    if (g.m == 0 || g.n == 0) continue;
    if (g.k == 0) {  // C = beta C with beta 0 or 1; an epilogue of a zero product is zero too
      if (g.beta != 0.f) continue;
      for (void* out : {g.c, b.epilogue == Epilogue::gelu_aux ? at(b.aux, i * b.stride_c, g.dtype) : nullptr})
        for (int r = 0; out && r < g.m; ++r) std::memset(at(out, (long long)r * g.ldc, g.dtype), 0, std::size_t(g.n) * dtype_size(g.dtype));
      continue;
    }
    if (b.epilogue == Epilogue::none)
      gemm_cpu(g);
    else
      entry_with_epilogue(g, b.epilogue, at(b.aux, i * b.stride_c, g.dtype));
  }
}

std::string describe_batched_gemm(const BatchedGemmArgs& b) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "\"m\": %d, \"n\": %d, \"k\": %d, \"batch\": %d, \"trans_a\": %d, \"trans_b\": %d, \"beta\": %g, "
                "\"epilogue\": \"%s\", \"a\": \"%p\", \"b\": \"%p\", \"c\": \"%p\"",
                b.g.m, b.g.n, b.g.k, b.batch, int(b.g.trans_a), int(b.g.trans_b), double(b.g.beta),
                epilogue_name(b.epilogue), b.g.a, b.g.b, static_cast<const void*>(b.g.c));
  return buf;
}

// 16-bit operands without tensor cores on the GPU: cuBLASLt would put them on the tensor cores,
// so each entry is a pedantic GEMM (gemm_cuda) and the epilogue a GeLU kernel after them, over
// C as one contiguous block (what every caller's epilogue writes).
static void batched_gemm_pedantic(const Exec& ex, const BatchedGemmArgs& b) {
  const GemmArgs& g = b.g;
  for (int i = 0; i < b.batch; ++i) {
    GemmArgs e = g;
    e.a = at(g.a, i * b.stride_a, g.dtype);
    e.b = at(g.b, i * b.stride_b, g.dtype);
    e.c = at(b.epilogue == Epilogue::gelu_aux ? b.aux : g.c, i * b.stride_c, g.dtype);
    gemm(ex, e);
  }
  if (b.epilogue == Epilogue::none) return;
  if (g.ldc != g.n || (b.batch > 1 && b.stride_c != (long long)g.m * g.n))
    throw Error("batched_gemm: without tensor cores the " + std::string(epilogue_name(b.epilogue)) +
                " epilogue needs a contiguous C");
  const std::size_t n = std::size_t(b.batch) * g.m * g.n;
  if (b.epilogue == Epilogue::gelu_aux)
    gelu_forward(ex, b.aux, g.c, n, g.dtype);
  else
    gelu_backward(ex, b.aux, g.c, g.c, n, g.dtype);
}

void batched_gemm(const Exec& ex, const BatchedGemmArgs& b) {
  check_batched(b);
  if (b.batch == 0 || b.g.m == 0 || b.g.n == 0) return;
  if (ex.backend == Backend::cuda) {
    if (!ex.tensor_cores && b.g.dtype != DType::f32 && b.g.k > 0) return batched_gemm_pedantic(ex, b);
    return batched_gemm_cuda(b, ex);
  }
  run_host(ex, "batched_gemm", [b] { batched_gemm_cpu(b); }, records_details(ex) ? describe_batched_gemm(b) : std::string());
}

#if !MOEBENCH_WITH_CUDA
void batched_gemm_cuda(const BatchedGemmArgs&, const Exec&) { cuda_not_built("batched_gemm"); }
BatchedGemmAlgoStats batched_gemm_algo_stats() { return {}; }
#endif

}  // namespace moebench
