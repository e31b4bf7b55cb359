// Gating: softmax over the experts of each prototype, then top-k inside each prototype
// (M6-T expert prototyping, Eq. 3 and Fig. 8; Z = 1 is plain top-k over all experts).
// E experts form Z prototypes of F = E/Z consecutive experts. Per token there are
// S = Z*k slots; slot z*k + j holds the j-th best expert of prototype z (ties: lower index),
// as a global expert id, and its softmax probability as the combine weight.
// The CUDA kernel runs one warp per (token, prototype), or a block where a prototype has more
// than 256 experts, so prototypes are routed in parallel: the cost follows k, not Z*k.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include "kernels/exec.h"

namespace moebench {

struct GateShape {
  int tokens = 0, experts = 0, prototypes = 1, k = 1;
  int per_prototype() const { return experts / prototypes; }
  int slots() const { return prototypes * k; }
};

// logits [T, E] -> probs [T, E], expert [T, S] (int32), weight [T, S]
void softmax_topk_cpu(const GateShape& g, const float* logits, float* probs, std::int32_t* expert, float* weight);
void softmax_topk_cuda(const GateShape& g, const float* logits, float* probs, std::int32_t* expert, float* weight,
                       void* stream);
void softmax_topk(const Exec& ex, const GateShape& g, const float* logits, float* probs, std::int32_t* expert,
                  float* weight);
// The same from the three fp32 slices [T, 3E] of the gate's GEMM over the weight's bf16 parts
// (kernels/bf16_split.h): logits = (s0 + s1) + s2, summed as sum_split3 sums them and written to
// `logits` on the way -- one kernel where sum_split3 and softmax_topk were two.
void softmax_topk_from_slices_cuda(const GateShape& g, const float* slices, float* logits, float* probs,
                                   std::int32_t* expert, float* weight, void* stream);
void softmax_topk_from_slices(const Exec& ex, const GateShape& g, const float* slices, float* logits, float* probs,
                              std::int32_t* expert, float* weight);

// Shared memory of the CUDA top-k kernel: one float per expert of a prototype, beside the
// kernel's static scratch. Past the default 48 KiB per block it must opt in, up to the device's
// opt-in limit; beyond that the prototype is too large for the kernel (a clear error).
struct GateSharedMemory {
  std::size_t dynamic_bytes = 0;
  bool opt_in = false;
  std::optional<std::string> error;
};
GateSharedMemory softmax_topk_shared_memory(int per_prototype, std::size_t static_bytes, std::size_t opt_in_limit);

// The backward's references, which gate_logit_grads runs in one pass (kernels/gate_grads.h).
// Softmax backward inside each prototype: dlogits = p * (dp - sum_{prototype} p * dp).
void softmax_backward_cpu(const GateShape& g, const float* probs, const float* dprobs, float* dlogits);
// dprobs[t, expert[t, s]] += dweight[t, s] for every slot (then the aux-loss gradient adds on).
void scatter_slot_grads_cpu(const GateShape& g, const std::int32_t* expert, const float* dweight, float* dprobs);

}  // namespace moebench
