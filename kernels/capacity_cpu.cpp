#include <cmath>
#include <vector>
#include "kernels/capacity.h"

namespace moebench {

int expert_capacity(int slots, int tokens_per_group, int experts, double capacity_factor) {
  return static_cast<int>(std::ceil(double(slots) * tokens_per_group / experts * capacity_factor - 1e-9));
}

void assign_positions_cpu(const CapacityShape& c, const std::int32_t* expert, std::int32_t* position,
                          std::int32_t* routed, std::int32_t* kept) {
  const GateShape& g = c.gate;
  const int S = g.slots(), E = g.experts, per_group = g.tokens / c.groups;
  for (int gr = 0; gr < c.groups; ++gr) {
    std::vector<std::int32_t> count(E, 0);
    for (int j = 0; j < g.k; ++j)
      for (int t = gr * per_group; t < (gr + 1) * per_group; ++t)
        for (int z = 0; z < g.prototypes; ++z) {
          const std::size_t slot = std::size_t(t) * S + std::size_t(z) * g.k + j;
          const int pos = count[expert[slot]]++;
          position[slot] = (c.capacity < 0 || pos < c.capacity) ? pos : -1;
        }
    for (int e = 0; e < E; ++e) {
      routed[std::size_t(gr) * E + e] = count[e];
      kept[std::size_t(gr) * E + e] = c.capacity < 0 ? count[e] : std::min(count[e], c.capacity);
    }
  }
}

std::size_t assign_positions_workspace_bytes(const Exec& ex, const CapacityShape& c) {
  if (ex.backend != Backend::cuda) return 0;
  const std::size_t per_group = std::size_t(c.gate.tokens / c.groups);
  const std::size_t length = std::size_t(c.gate.k) * per_group, tile = std::size_t(capacity_tile(long(length)));
  const std::size_t tiles = (length + tile - 1) / tile;
  return std::size_t(c.groups) * std::size_t(c.gate.experts) * tiles * sizeof(std::int32_t);
}

void assign_positions(const Exec& ex, const CapacityShape& c, const std::int32_t* expert, std::int32_t* position,
                      std::int32_t* routed, std::int32_t* kept, void* workspace, std::size_t workspace_bytes) {
  if (ex.backend == Backend::cuda)
    return assign_positions_cuda(c, expert, position, routed, kept, workspace, workspace_bytes, ex.stream);
  run_host(ex, "assign_positions", [=] { assign_positions_cpu(c, expert, position, routed, kept); });
}

#if !MOEBENCH_WITH_CUDA
void assign_positions_cuda(const CapacityShape&, const std::int32_t*, std::int32_t*, std::int32_t*, std::int32_t*,
                           void*, std::size_t, void*) {
  cuda_not_built("assign_positions");
}
#endif

}  // namespace moebench
