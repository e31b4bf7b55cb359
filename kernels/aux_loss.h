// GShard-style load-balancing loss as in M6-T Fig. 8, per token group g and prototype:
//   density[g, e] = share of the group's tokens whose first choice (in e's prototype) is e
//   proxy[g, e]   = mean softmax probability of e over the group's tokens
//   aux_g = coef * (F / Z) * sum_e density[g, e] * proxy[g, e]   (= coef when balanced)
// Density is a count, so only proxy carries gradient: d aux_g / d probs[t, e] =
// coef * (F / Z) * density[g, e] / T_g, added by gate_logit_grads (kernels/gate_grads.h).
#pragma once
#include <cstdint>
#include "kernels/exec.h"
#include "kernels/gating.h"

namespace moebench {

void aux_loss_stats_cpu(const GateShape& g, int groups, const float* probs, const std::int32_t* expert, float* density,
                        float* proxy);
void aux_loss_stats_cuda(const GateShape& g, int groups, const float* probs, const std::int32_t* expert,
                         float* density, float* proxy, void* stream);
void aux_loss_stats(const Exec& ex, const GateShape& g, int groups, const float* probs, const std::int32_t* expert,
                    float* density, float* proxy);

// x[t, e] += bias[group of t, e] for x [T, E] with G equal contiguous token groups: the gradient's
// reference, which gate_logit_grads adds in its pass (kernels/gate_grads.h).
void add_group_bias_cpu(int tokens, int experts, int groups, const float* bias, float* x);

}  // namespace moebench
