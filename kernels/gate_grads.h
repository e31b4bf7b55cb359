// The gate's backward from its combine weights' gradients to its logits' in one pass over each
// (token, prototype) row, where it was four ops (a zero fill, the slot scatter, the aux loss's
// bias and the softmax backward) and, on bf16, a fifth splitting the result into bf16 parts:
//   dprobs[t, e] = dweight[t, s] where slot s chose e (else 0), plus aux_scale * density[g(t), e]
//                  when `density` is given (the aux loss's gradient, kernels/aux_loss.h);
//   dlogits      = p * (dprobs - sum over the prototype of p * dprobs)   (kernels/gating.h).
// Out: dlogits in fp32 [T, E] (parts.count 0), or its bf16 parts side by side [T, parts.count * E]
// as split_bf16 lays them out (kernels/bf16_split.h). The CPU runs the four ops' references in
// their order; the CUDA kernel takes a warp per row, each expert's dprobs from its one slot.
#pragma once
#include <cstdint>
#include "kernels/bf16_split.h"
#include "kernels/exec.h"
#include "kernels/gating.h"

namespace moebench {

struct GateGradArgs {
  GateShape g;
  int groups = 1;                      // density's token groups: G equal contiguous ones
  const std::int32_t* expert = nullptr;  // [T, S] the routing's experts
  const float* dweight = nullptr;        // [T, S] the combine weights' gradients
  const float* probs = nullptr;          // [T, E] the softmax
  const float* density = nullptr;        // [G, E] or nullptr: no aux loss
  float aux_scale = 0.f;                 // d aux / d probs = aux_scale * density
};

void gate_logit_grads_cpu(const GateGradArgs& a, Bf16Parts parts, void* out);
void gate_logit_grads_cuda(const GateGradArgs& a, Bf16Parts parts, void* out, void* stream);
void gate_logit_grads(const Exec& ex, const GateGradArgs& a, Bf16Parts parts, void* out);

}  // namespace moebench
