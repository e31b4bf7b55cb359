#include <algorithm>
#include "kernels/aux_loss.h"

namespace moebench {

void aux_loss_stats_cpu(const GateShape& g, int groups, const float* probs, const std::int32_t* expert, float* density,
                        float* proxy) {
  const int E = g.experts, S = g.slots(), per_group = g.tokens / groups;
  std::fill(density, density + std::size_t(groups) * E, 0.f);
  std::fill(proxy, proxy + std::size_t(groups) * E, 0.f);
  for (int t = 0; t < g.tokens; ++t) {
    const int gr = t / per_group;
    for (int e = 0; e < E; ++e) proxy[std::size_t(gr) * E + e] += probs[std::size_t(t) * E + e];
    for (int z = 0; z < g.prototypes; ++z) density[std::size_t(gr) * E + expert[std::size_t(t) * S + std::size_t(z) * g.k]] += 1.f;
  }
  for (std::size_t i = 0; i < std::size_t(groups) * E; ++i) {
    density[i] /= float(per_group);
    proxy[i] /= float(per_group);
  }
}

void add_group_bias_cpu(int tokens, int experts, int groups, const float* bias, float* x) {
  const int per_group = tokens / groups;
  for (int t = 0; t < tokens; ++t)
    for (int e = 0; e < experts; ++e) x[std::size_t(t) * experts + e] += bias[std::size_t(t / per_group) * experts + e];
}

void aux_loss_stats(const Exec& ex, const GateShape& g, int groups, const float* probs, const std::int32_t* expert,
                    float* density, float* proxy) {
  if (ex.backend == Backend::cuda) return aux_loss_stats_cuda(g, groups, probs, expert, density, proxy, ex.stream);
  run_host(ex, "aux_loss_stats", [=] { aux_loss_stats_cpu(g, groups, probs, expert, density, proxy); });
}


#if !MOEBENCH_WITH_CUDA
void aux_loss_stats_cuda(const GateShape&, int, const float*, const std::int32_t*, float*, float*, void*) {
  cuda_not_built("aux_loss_stats");
}
#endif

}  // namespace moebench
