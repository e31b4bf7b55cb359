#include <algorithm>
#include <cmath>
#include <vector>
#include "kernels/bf16_split.h"
#include "kernels/gating.h"

namespace moebench {

void softmax_topk_cpu(const GateShape& g, const float* logits, float* probs, std::int32_t* expert, float* weight) {
  const int F = g.per_prototype(), S = g.slots();
  std::vector<float> row(F);
  for (int t = 0; t < g.tokens; ++t) {
    for (int z = 0; z < g.prototypes; ++z) {
      const float* l = logits + std::size_t(t) * g.experts + std::size_t(z) * F;
      float* p = probs + std::size_t(t) * g.experts + std::size_t(z) * F;
      float mx = -INFINITY;
      for (int f = 0; f < F; ++f) mx = std::max(mx, l[f]);
      float sum = 0.f;
      for (int f = 0; f < F; ++f) sum += (p[f] = std::exp(l[f] - mx));
      for (int f = 0; f < F; ++f) p[f] /= sum;
      std::copy(p, p + F, row.begin());
      for (int j = 0; j < g.k; ++j) {
        int best = 0;
        for (int f = 1; f < F; ++f)
          if (row[f] > row[best]) best = f;  // strict: ties keep the lower index
        const std::size_t slot = std::size_t(t) * S + std::size_t(z) * g.k + j;
        expert[slot] = z * F + best;
        weight[slot] = row[best];
        row[best] = -1.f;  // probabilities are >= 0: never chosen again
      }
    }
  }
}

void softmax_backward_cpu(const GateShape& g, const float* probs, const float* dprobs, float* dlogits) {
  const int F = g.per_prototype();
  for (int t = 0; t < g.tokens; ++t)
    for (int z = 0; z < g.prototypes; ++z) {
      const std::size_t o = std::size_t(t) * g.experts + std::size_t(z) * F;
      float dot = 0.f;
      for (int f = 0; f < F; ++f) dot += probs[o + f] * dprobs[o + f];
      for (int f = 0; f < F; ++f) dlogits[o + f] = probs[o + f] * (dprobs[o + f] - dot);
    }
}

void scatter_slot_grads_cpu(const GateShape& g, const std::int32_t* expert, const float* dweight, float* dprobs) {
  const int S = g.slots();
  for (int t = 0; t < g.tokens; ++t)
    for (int s = 0; s < S; ++s)
      dprobs[std::size_t(t) * g.experts + expert[std::size_t(t) * S + s]] += dweight[std::size_t(t) * S + s];
}

GateSharedMemory softmax_topk_shared_memory(int per_prototype, std::size_t static_bytes, std::size_t opt_in_limit) {
  constexpr std::size_t kDefaultLimit = 48 * 1024;
  GateSharedMemory m;
  m.dynamic_bytes = std::size_t(per_prototype) * sizeof(float);
  const std::size_t total = m.dynamic_bytes + static_bytes;
  m.opt_in = total > kDefaultLimit;
  const std::size_t limit = std::max(opt_in_limit, kDefaultLimit);
  if (total > limit)
    m.error = "softmax_topk: " + std::to_string(per_prototype) + " experts per prototype need " + std::to_string(total) +
              " bytes of shared memory per block, this GPU allows " + std::to_string(limit) + " (at most " +
              std::to_string((limit - static_bytes) / sizeof(float)) +
              " experts per prototype); use more --prototypes or fewer --experts";
  return m;
}

void softmax_topk(const Exec& ex, const GateShape& g, const float* logits, float* probs, std::int32_t* expert,
                  float* weight) {
  if (ex.backend == Backend::cuda) return softmax_topk_cuda(g, logits, probs, expert, weight, ex.stream);
  run_host(ex, "softmax_topk", [=] { softmax_topk_cpu(g, logits, probs, expert, weight); });
}
void softmax_topk_from_slices(const Exec& ex, const GateShape& g, const float* slices, float* logits, float* probs,
                              std::int32_t* expert, float* weight) {
  if (ex.backend == Backend::cuda)
    return softmax_topk_from_slices_cuda(g, slices, logits, probs, expert, weight, ex.stream);
  run_host(ex, "softmax_topk_from_slices", [=] {
    sum_split3_cpu(slices, std::size_t(g.tokens), g.experts, logits);
    softmax_topk_cpu(g, logits, probs, expert, weight);
  });
}

#if !MOEBENCH_WITH_CUDA
void softmax_topk_cuda(const GateShape&, const float*, float*, std::int32_t*, float*, void*) { cuda_not_built("softmax_topk"); }
void softmax_topk_from_slices_cuda(const GateShape&, const float*, float*, float*, std::int32_t*, float*, void*) {
  cuda_not_built("softmax_topk_from_slices");
}
#endif

}  // namespace moebench
