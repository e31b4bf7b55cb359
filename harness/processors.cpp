#include "harness/processors.h"
#include <algorithm>
#include <thread>
#include "kernels/gemm.h"

namespace moebench {

int cores_shared_by_ranks(const Runtime& rt, Backend backend) {
  if (backend != Backend::cpu) return 0;
  const int cores = int(std::thread::hardware_concurrency()) / std::max(1, cpu_blas_threads());
  return cores >= 1 && cores < rt.ranks_per_machine() ? cores : 0;
}

std::string processors_cell(const Runtime& rt, Backend backend) {
  const int shared = cores_shared_by_ranks(rt, backend);
  if (shared == 0) return "one per rank";
  const int on_machine = rt.ranks_per_machine();
  return std::to_string(shared) + " cores shared by the " + std::to_string(on_machine) + " ranks" +
         (rt.nodes() > 1 ? " of " + std::to_string(rt.nodes()) + " nodes on one machine" : "");
}

}  // namespace moebench
