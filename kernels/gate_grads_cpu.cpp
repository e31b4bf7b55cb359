#include "kernels/gate_grads.h"
#include <string>
#include <vector>
#include "kernels/aux_loss.h"
#include "kernels/axpy.h"

namespace moebench {

void gate_logit_grads_cpu(const GateGradArgs& a, Bf16Parts parts, void* out) {
  const GateShape& g = a.g;
  const std::size_t te = std::size_t(g.tokens) * g.experts;
  std::vector<float> dprobs(te, 0.f);
  scatter_slot_grads_cpu(g, a.expert, a.dweight, dprobs.data());
  if (a.density) {
    std::vector<float> bias(std::size_t(a.groups) * g.experts, 0.f);
    axpy_cpu(bias.size(), a.aux_scale, a.density, bias.data());
    add_group_bias_cpu(g.tokens, g.experts, a.groups, bias.data(), dprobs.data());
  }
  if (parts.count == 0) return softmax_backward_cpu(g, a.probs, dprobs.data(), static_cast<float*>(out));
  std::vector<float> dlogits(te);
  softmax_backward_cpu(g, a.probs, dprobs.data(), dlogits.data());
  split_bf16_cpu(dlogits.data(), std::size_t(g.tokens), g.experts, parts, static_cast<std::uint16_t*>(out));
}

void gate_logit_grads(const Exec& ex, const GateGradArgs& a, Bf16Parts parts, void* out) {
  if (parts.count < 0 || parts.count > 4)
    throw Error("gate_logit_grads: " + std::to_string(parts.count) + " bf16 slices; allowed: 0 (fp32 out) to 4");
  for (int s = 0; s < parts.count; ++s)
    if (parts.part[s] < 0 || parts.part[s] > 2)
      throw Error("gate_logit_grads: part " + std::to_string(parts.part[s]) + "; allowed: 0 (hi), 1 (lo), 2 (lo2)");
  if (a.groups < 1 || a.g.tokens % a.groups != 0)
    throw Error("gate_logit_grads: " + std::to_string(a.g.tokens) + " tokens in " + std::to_string(a.groups) +
                " groups; allowed: groups >= 1 dividing the tokens");
  if (a.g.tokens == 0) return;
  if (ex.backend == Backend::cuda) return gate_logit_grads_cuda(a, parts, out, ex.stream);
  run_host(ex, "gate_logit_grads", [=] { gate_logit_grads_cpu(a, parts, out); });
}

#if !MOEBENCH_WITH_CUDA
void gate_logit_grads_cuda(const GateGradArgs&, Bf16Parts, void*, void*) { cuda_not_built("gate_logit_grads"); }
#endif

}  // namespace moebench
