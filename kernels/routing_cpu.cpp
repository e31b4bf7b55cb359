#include "kernels/routing.h"
#include "kernels/aux_loss.h"
#include "kernels/bf16_split.h"
#include "kernels/gating.h"

namespace moebench {

std::size_t route_tokens_workspace_bytes(const Exec& ex, const CapacityShape& c, bool aux) {
  if (ex.backend != Backend::cuda) return 0;
  const std::size_t partials = aux ? std::size_t(c.groups) * std::size_t(route_aux_chunks(c.gate.tokens / c.groups)) *
                                         std::size_t(c.gate.experts) * 2 * sizeof(float)
                                   : 0;
  return assign_positions_workspace_bytes(ex, c) + partials;
}

const char* route_kernels_name(RouteKernels k) { return k == RouteKernels::one_pass ? "one_pass" : "separate"; }

std::optional<RouteKernels> parse_route_kernels(const std::string& name) {
  for (RouteKernels k : {RouteKernels::one_pass, RouteKernels::separate})
    if (name == route_kernels_name(k)) return k;
  return std::nullopt;
}

void route_tokens(const Exec& ex, const RouteArgs& a) {
  if (ex.backend == Backend::cuda) return route_tokens_cuda(a, ex.stream, route_tokens_kernels_cuda(a.shape.gate));
  run_host(ex, "route_tokens", [a] {
    const GateShape& g = a.shape.gate;
    if (a.slices) sum_split3_cpu(a.slices, std::size_t(g.tokens), g.experts, a.logits);
    softmax_topk_cpu(g, a.logits, a.probs, a.expert, a.weight);
    assign_positions_cpu(a.shape, a.expert, a.position, a.routed, a.kept);
    if (a.density) aux_loss_stats_cpu(g, a.shape.groups, a.probs, a.expert, a.density, a.proxy);
  });
}

void route_tokens(const Exec& ex, const RouteArgs& a, RouteKernels kernels) {
  if (ex.backend != Backend::cuda) throw Error("route_tokens: a choice of kernels is for CUDA; the CPU has its references");
  route_tokens_cuda(a, ex.stream, kernels);
}

#if !MOEBENCH_WITH_CUDA
RouteKernels route_tokens_kernels_cuda(const GateShape&) { cuda_not_built("route_tokens"); }
void route_tokens_cuda(const RouteArgs&, void*, RouteKernels) { cuda_not_built("route_tokens"); }
#endif

}  // namespace moebench
