#include <cstring>
#include "kernels/grouped_gemm.h"
#include "kernels/host_widen.h"

namespace moebench {

// C = beta * C for a problem with k = 0 (BLAS would do the same; stated here so both
// backends treat empty experts alike).
static void scale_c_cpu(const GemmArgs& g) {
  WidenedView view(g.c, g.dtype, g.m, g.n, g.ldc, g.beta != 0.f);
  float* c = view.data();
  for (int i = 0; i < g.m; ++i)
    for (int j = 0; j < g.n; ++j) c[std::size_t(i) * g.ldc + j] = g.beta == 0.f ? 0.f : g.beta * c[std::size_t(i) * g.ldc + j];
  view.narrow();
}

void grouped_gemm(const Exec& ex, const std::vector<GemmArgs>& problems, ExpertGemm mode, void* device_pointers,
                  std::size_t device_pointer_bytes) {
  const bool pedantic_16bit = !ex.tensor_cores && !problems.empty() && problems[0].dtype != DType::f32;
  if (ex.backend == Backend::cuda && mode == ExpertGemm::grouped && !pedantic_16bit)
    return grouped_gemm_cuda(problems, ex.stream, ex.blas, ex.tensor_cores, device_pointers, device_pointer_bytes);
  // serial (and grouped on the CPU, and 16-bit without tensor cores, which the grouped call cannot do)
  for (const GemmArgs& g : problems) {
    if (g.m == 0 || g.n == 0) continue;
    if (g.k == 0 && ex.backend == Backend::cpu) {
      run_host(ex, "gemm", [g] { scale_c_cpu(g); }, records_details(ex) ? describe_gemm(g) : std::string());
      continue;
    }
    gemm(ex, g);
  }
}

#if !MOEBENCH_WITH_CUDA
void grouped_gemm_cuda(const std::vector<GemmArgs>&, void*, void*, bool, void*, std::size_t) {
  cuda_not_built("grouped_gemm");
}
#endif

}  // namespace moebench
