#include <algorithm>
#include <cmath>
#include "kernels/looped_gating.h"

namespace moebench {

void prototype_softmax_cpu(const GateShape& g, const float* logits, float* probs) {
  const int F = g.per_prototype();
  for (int t = 0; t < g.tokens; ++t)
    for (int z = 0; z < g.prototypes; ++z) {
      const std::size_t o = std::size_t(t) * g.experts + std::size_t(z) * F;
      float mx = -INFINITY;
      for (int f = 0; f < F; ++f) mx = std::max(mx, logits[o + f]);
      float sum = 0.f;
      for (int f = 0; f < F; ++f) sum += (probs[o + f] = std::exp(logits[o + f] - mx));
      for (int f = 0; f < F; ++f) probs[o + f] /= sum;
    }
}

void argmax_round_cpu(const GateShape& g, int round, const float* probs, float* remaining, std::int32_t* expert,
                      float* weight, float* one_hot) {
  const int F = g.per_prototype(), S = g.slots();
  std::fill(one_hot, one_hot + std::size_t(g.tokens) * g.experts, 0.f);
  for (int t = 0; t < g.tokens; ++t)
    for (int z = 0; z < g.prototypes; ++z) {
      const std::size_t o = std::size_t(t) * g.experts + std::size_t(z) * F;
      int best = 0;
      for (int f = 1; f < F; ++f)
        if (remaining[o + f] > remaining[o + best]) best = f;  // strict: ties keep the lower index
      const std::size_t slot = std::size_t(t) * S + std::size_t(z) * g.k + round;
      expert[slot] = z * F + best;
      weight[slot] = probs[o + best];
      remaining[o + best] = -1.f;
      one_hot[o + best] = 1.f;
    }
}

void cumsum_positions_round_cpu(const CapacityShape& c, int round, const float* one_hot, std::int32_t* routed,
                                std::int32_t* kept, std::int32_t* position_dense, const std::int32_t* expert,
                                std::int32_t* position) {
  const GateShape& g = c.gate;
  const int E = g.experts, S = g.slots(), per_group = g.tokens / c.groups;
  for (int gr = 0; gr < c.groups; ++gr)
    for (int e = 0; e < E; ++e) {
      std::int32_t running = routed[std::size_t(gr) * E + e];
      for (int t = gr * per_group; t < (gr + 1) * per_group; ++t) {
        position_dense[std::size_t(t) * E + e] = running;
        running += one_hot[std::size_t(t) * E + e] != 0.f;
      }
      routed[std::size_t(gr) * E + e] = running;
      kept[std::size_t(gr) * E + e] = std::min(running, std::int32_t(c.capacity));
    }
  for (int t = 0; t < g.tokens; ++t)
    for (int z = 0; z < g.prototypes; ++z) {
      const std::size_t slot = std::size_t(t) * S + std::size_t(z) * g.k + round;
      const std::int32_t p = position_dense[std::size_t(t) * E + expert[slot]];
      position[slot] = p < c.capacity ? p : -1;
    }
}

void combine_round_cpu(const CapacityShape& c, int round, const std::int32_t* expert, const std::int32_t* position,
                       const float* weight, float* combine, float* dispatch) {
  const GateShape& g = c.gate;
  const int E = g.experts, C = c.capacity, F = g.per_prototype(), S = g.slots();
  for (int t = 0; t < g.tokens; ++t)
    for (int e = 0; e < E; ++e) {
      const std::size_t slot = std::size_t(t) * S + std::size_t(e / F) * g.k + round;
      const bool mine = expert[slot] == e;  // the round's one-hot expert factor
      const float gate = mine && position[slot] >= 0 ? weight[slot] : 0.f;
      float* comb = combine + (std::size_t(t) * E + e) * C;
      float* disp = dispatch + (std::size_t(t) * E + e) * C;
      for (int k = 0; k < C; ++k) {
        comb[k] += k == position[slot] ? gate : 0.f;  // times the one-hot position factor
        disp[k] = comb[k] != 0.f ? 1.f : 0.f;
      }
    }
}

void gather_slot_grads_cpu(const CapacityShape& c, const std::int32_t* expert, const std::int32_t* position,
                           const float* dcombine, float* dweight) {
  const GateShape& g = c.gate;
  const std::size_t n = std::size_t(g.tokens) * g.slots();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t t = i / g.slots();
    dweight[i] = position[i] >= 0 ? dcombine[(t * g.experts + expert[i]) * c.capacity + position[i]] : 0.f;
  }
}

void prototype_softmax(const Exec& ex, const GateShape& g, const float* logits, float* probs) {
  if (ex.backend == Backend::cuda) return prototype_softmax_cuda(g, logits, probs, ex.stream);
  run_host(ex, "prototype_softmax", [=] { prototype_softmax_cpu(g, logits, probs); });
}
void argmax_round(const Exec& ex, const GateShape& g, int round, const float* probs, float* remaining,
                  std::int32_t* expert, float* weight, float* one_hot) {
  if (ex.backend == Backend::cuda)
    return argmax_round_cuda(g, round, probs, remaining, expert, weight, one_hot, ex.stream);
  run_host(ex, "argmax_round", [=] { argmax_round_cpu(g, round, probs, remaining, expert, weight, one_hot); });
}
void cumsum_positions_round(const Exec& ex, const CapacityShape& c, int round, const float* one_hot,
                            std::int32_t* routed, std::int32_t* kept, std::int32_t* position_dense,
                            const std::int32_t* expert, std::int32_t* position) {
  if (ex.backend == Backend::cuda)
    return cumsum_positions_round_cuda(c, round, one_hot, routed, kept, position_dense, expert, position, ex.stream);
  run_host(ex, "cumsum_positions_round",
           [=] { cumsum_positions_round_cpu(c, round, one_hot, routed, kept, position_dense, expert, position); });
}
void combine_round(const Exec& ex, const CapacityShape& c, int round, const std::int32_t* expert,
                   const std::int32_t* position, const float* weight, float* combine, float* dispatch) {
  if (ex.backend == Backend::cuda)
    return combine_round_cuda(c, round, expert, position, weight, combine, dispatch, ex.stream);
  run_host(ex, "combine_round", [=] { combine_round_cpu(c, round, expert, position, weight, combine, dispatch); });
}
void gather_slot_grads(const Exec& ex, const CapacityShape& c, const std::int32_t* expert,
                       const std::int32_t* position, const float* dcombine, float* dweight) {
  if (ex.backend == Backend::cuda) return gather_slot_grads_cuda(c, expert, position, dcombine, dweight, ex.stream);
  run_host(ex, "gather_slot_grads", [=] { gather_slot_grads_cpu(c, expert, position, dcombine, dweight); });
}

#if !MOEBENCH_WITH_CUDA
void prototype_softmax_cuda(const GateShape&, const float*, float*, void*) { cuda_not_built("prototype_softmax"); }
void argmax_round_cuda(const GateShape&, int, const float*, float*, std::int32_t*, float*, float*, void*) {
  cuda_not_built("argmax_round");
}
void cumsum_positions_round_cuda(const CapacityShape&, int, const float*, std::int32_t*, std::int32_t*, std::int32_t*,
                                 const std::int32_t*, std::int32_t*, void*) {
  cuda_not_built("cumsum_positions_round");
}
void combine_round_cuda(const CapacityShape&, int, const std::int32_t*, const std::int32_t*, const float*, float*,
                        float*, void*) {
  cuda_not_built("combine_round");
}
void gather_slot_grads_cuda(const CapacityShape&, const std::int32_t*, const std::int32_t*, const float*, float*,
                            void*) {
  cuda_not_built("gather_slot_grads");
}
#endif

}  // namespace moebench
