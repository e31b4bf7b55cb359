// M6-T's own gate, as its Fig. 8 pseudo code (and GShard) compute it: dense one-hot tensors,
// k sequential rounds of arg-max. Each round takes, per (token, prototype), the arg-max of the
// probabilities not chosen yet, materialises the winners as a one-hot [T, E] mask, counts each
// expert's positions with a cumulative sum over the group's tokens, drops what exceeds the
// capacity C, and adds the round's kept assignments into the dense combine tensor [T, E, C]
// (and the dispatch mask, combine != 0) -- O(T E) per round for the mask and the sums, O(T E C)
// for the tensors, so k rounds cost O(k T E C): the top-k cost expert prototyping avoids.
// The routing equals the fused gate's (kernels/gating.h, kernels/capacity.h): same experts,
// weights, positions (priority: round j, then token order) and counts.
#pragma once
#include <cstdint>
#include "kernels/capacity.h"
#include "kernels/exec.h"

namespace moebench {

// logits [T, E] -> probs [T, E]: softmax inside each prototype.
void prototype_softmax_cpu(const GateShape& g, const float* logits, float* probs);
void prototype_softmax_cuda(const GateShape& g, const float* logits, float* probs, void* stream);
void prototype_softmax(const Exec& ex, const GateShape& g, const float* logits, float* probs);

// Round j: per (token, prototype) the arg-max of `remaining` [T, E] (ties: lower index) into
// slot z*k + j of expert / weight [T, S] (weight = probs at it); one_hot [T, E] = 1 at the
// round's winners, 0 elsewhere; the winners' `remaining` becomes -1 (probabilities are >= 0).
void argmax_round_cpu(const GateShape& g, int round, const float* probs, float* remaining, std::int32_t* expert,
                      float* weight, float* one_hot);
void argmax_round_cuda(const GateShape& g, int round, const float* probs, float* remaining, std::int32_t* expert,
                       float* weight, float* one_hot, void* stream);
void argmax_round(const Exec& ex, const GateShape& g, int round, const float* probs, float* remaining,
                  std::int32_t* expert, float* weight, float* one_hot);

// Round j's positions: per (group, expert) the exclusive cumulative sum of one_hot over the
// group's tokens, starting from routed[g, e] (earlier rounds' assignments), written densely to
// position_dense [T, E]; routed advances and kept[g, e] = min(routed, C). Then each round-j
// slot's position is position_dense at its expert when below C, else -1 (dropped).
void cumsum_positions_round_cpu(const CapacityShape& c, int round, const float* one_hot, std::int32_t* routed,
                                std::int32_t* kept, std::int32_t* position_dense, const std::int32_t* expert,
                                std::int32_t* position);
void cumsum_positions_round_cuda(const CapacityShape& c, int round, const float* one_hot, std::int32_t* routed,
                                 std::int32_t* kept, std::int32_t* position_dense, const std::int32_t* expert,
                                 std::int32_t* position, void* stream);
void cumsum_positions_round(const Exec& ex, const CapacityShape& c, int round, const float* one_hot,
                            std::int32_t* routed, std::int32_t* kept, std::int32_t* position_dense,
                            const std::int32_t* expert, std::int32_t* position);

// Round j's share of combine [T, E, C]: += weight at (t, expert, position) of each kept round-j
// slot, evaluated at every (t, e, c) as the paper's einsum of the one-hot factors; dispatch
// [T, E, C] = 1 where combine is nonzero, else 0.
void combine_round_cpu(const CapacityShape& c, int round, const std::int32_t* expert, const std::int32_t* position,
                       const float* weight, float* combine, float* dispatch);
void combine_round_cuda(const CapacityShape& c, int round, const std::int32_t* expert, const std::int32_t* position,
                        const float* weight, float* combine, float* dispatch, void* stream);
void combine_round(const Exec& ex, const CapacityShape& c, int round, const std::int32_t* expert,
                   const std::int32_t* position, const float* weight, float* combine, float* dispatch);

// Combine-weight gradients from the combine tensor's: dweight[t, s] = dcombine[t, expert, position]
// for kept slots, 0 for dropped ones.
void gather_slot_grads_cpu(const CapacityShape& c, const std::int32_t* expert, const std::int32_t* position,
                           const float* dcombine, float* dweight);
void gather_slot_grads_cuda(const CapacityShape& c, const std::int32_t* expert, const std::int32_t* position,
                            const float* dcombine, float* dweight, void* stream);
void gather_slot_grads(const Exec& ex, const CapacityShape& c, const std::int32_t* expert,
                       const std::int32_t* position, const float* dcombine, float* dweight);

}  // namespace moebench
