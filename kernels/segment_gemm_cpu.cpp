#include <cstdio>
#include <string>
#include "kernels/segment_gemm.h"

namespace moebench {

std::string segment_gemm_unsupported(Backend backend, DType dtype, std::initializer_list<int> widths) {
  if (!is_float(dtype)) return "segment GEMMs take fp32, fp16 or bf16 operands, not " + std::string(dtype_name(dtype));
  if (backend == Backend::cpu) return {};
  if (dtype == DType::f32) return "on cuda the segment GEMMs run on the tensor cores: fp16 or bf16 operands only";
  for (int w : widths)
    if (w % 8 != 0)
      return "on cuda the segment GEMMs move 16-byte vectors: every width must be a multiple of 8, and " +
             std::to_string(w) + " is not";
  return {};
}

static void check_segment_gemm(const SegmentGemmArgs& g) {
  const auto fail = [](const std::string& why) { throw Error("segment_gemm: " + why); };
  if (g.segments < 0 || g.n < 0 || g.k < 0 || g.m < 0) fail("negative segments or width");
  if (g.segments > 0 && !g.offset) fail("no segment offsets");
  if (g.form == SegmentForm::rows && g.beta != 0.f) fail("the rows form overwrites C: beta must be 0");
  if (g.form == SegmentForm::weights && g.beta != 0.f && g.beta != 1.f) fail("the weights form takes beta 0 or 1");
  if (g.form == SegmentForm::weights && g.epilogue != Epilogue::none) fail("the weights form has no epilogue");
  if (g.epilogue != Epilogue::none && !g.aux) fail(std::string("the ") + epilogue_name(g.epilogue) + " epilogue needs an aux matrix");
}

static const char* elem(const void* base, long long elements, DType t) {
  return static_cast<const char*>(base) + elements * (long long)dtype_size(t);
}

void segment_gemm_cpu(const SegmentGemmArgs& g) {
  const long long bound = (long long)g.bound;
  for (int e = 0; e < g.segments; ++e) {
    long long first = g.offset[e], end = g.offset[e + 1];
    if (first < 0 || end < first)
      throw Error("segment_gemm: segment " + std::to_string(e) + " is [" + std::to_string(first) + ", " +
                  std::to_string(end) + "): offsets must start at 0 or more and not decrease");
    end = std::min(end, bound);
    first = std::min(first, end);
    const int rows = int(end - first);
    if (g.form == SegmentForm::rows) {
      GemmArgs p = dense_gemm(false, g.trans_b, rows, g.n, g.k, elem(g.a, first * g.k, g.dtype),
                              elem(g.b, e * g.stride_b, g.dtype), const_cast<char*>(elem(g.c, first * g.n, g.dtype)), g.dtype);
      batched_gemm_cpu(with_epilogue(p, g.epilogue, const_cast<char*>(g.aux ? elem(g.aux, first * g.n, g.dtype) : nullptr)));
    } else {
      GemmArgs p = dense_gemm(true, false, g.m, g.n, rows, elem(g.a, first * g.m, g.dtype), elem(g.b, first * g.n, g.dtype),
                              const_cast<char*>(elem(g.c, e * g.stride_c, g.dtype)), g.dtype, 1.f, g.beta);
      batched_gemm_cpu(with_epilogue(p, Epilogue::none, nullptr));
    }
  }
}

void segment_gemm(const Exec& ex, const SegmentGemmArgs& g) {
  check_segment_gemm(g);
  if (g.segments == 0 || g.n == 0 || (g.form == SegmentForm::weights && g.m == 0)) return;
  if (ex.backend == Backend::cuda) {
    if (const std::string why = segment_gemm_unsupported(ex.backend, g.dtype, {g.m, g.n, g.k}); !why.empty())
      throw Error("segment_gemm: " + why);
    return segment_gemm_cuda(g, ex.stream);
  }
  run_host(ex, "segment_gemm", [g] { segment_gemm_cpu(g); }, records_details(ex) ? describe_segment_gemm(g) : std::string());
}

std::string describe_segment_gemm(const SegmentGemmArgs& g) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "\"form\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"segments\": %d, \"trans_b\": %d, \"beta\": %g, "
                "\"epilogue\": \"%s\", \"a\": \"%p\", \"b\": \"%p\", \"c\": \"%p\"",
                g.form == SegmentForm::rows ? "rows" : "weights", g.m, g.n, g.k, g.segments, int(g.trans_b),
                double(g.beta), epilogue_name(g.epilogue), g.a, g.b, static_cast<const void*>(g.c));
  return buf;
}

#if !MOEBENCH_WITH_CUDA
void segment_gemm_cuda(const SegmentGemmArgs&, void*) { cuda_not_built("segment_gemm"); }
#endif

}  // namespace moebench
