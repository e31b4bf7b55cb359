#include "harness/processors.h"
#include <algorithm>
#include <thread>
#include "kernels/gemm.h"

namespace moebench {

int cores_shared_by_ranks(const BenchContext& ctx) {
  if (ctx.backend() != Backend::cpu || ctx.rt.local_size() != ctx.rt.world()) return 0;
  const int cores = int(std::thread::hardware_concurrency()) / std::max(1, cpu_blas_threads());
  return cores >= 1 && cores < ctx.world.size() ? cores : 0;
}

std::string processors_cell(const BenchContext& ctx) {
  const int shared = cores_shared_by_ranks(ctx);
  return shared > 0 ? std::to_string(shared) + " cores shared by the " + std::to_string(ctx.world.size()) + " ranks"
                    : "one per rank";
}

}  // namespace moebench
