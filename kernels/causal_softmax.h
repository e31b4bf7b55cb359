// Scaled, causally masked softmax over attention scores (the decoder's self-attention):
// scores [matrices, seq, seq], one matrix per (sequence, head); row i sees columns j <= i.
//   p[i, j] = exp(scale s[i, j] - max) / sum over j' <= i   (0 for j > i)
//   ds[i, j] = scale p[i, j] (dp[i, j] - sum over j' of p[i, j'] dp[i, j'])
// Scores, probabilities and their gradients in fp32/fp16/bf16, arithmetic in fp32.
#pragma once
#include <cstddef>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

struct CausalSoftmaxShape {
  int matrices = 0, seq = 0;
  float scale = 1.f;  // 1 / sqrt(head dim)
};

void causal_softmax_forward_cpu(const CausalSoftmaxShape& s, const float* scores, float* probs);
void causal_softmax_backward_cpu(const CausalSoftmaxShape& s, const float* probs, const float* dprobs, float* dscores);
void causal_softmax_forward_cuda(const CausalSoftmaxShape& s, const void* scores, void* probs, DType t, void* stream);
void causal_softmax_backward_cuda(const CausalSoftmaxShape& s, const void* probs, const void* dprobs, void* dscores, DType t,
                                  void* stream);

void causal_softmax_forward(const Exec& ex, const CausalSoftmaxShape& s, const void* scores, void* probs, DType t);
// dscores may alias dprobs.
void causal_softmax_backward(const Exec& ex, const CausalSoftmaxShape& s, const void* probs, const void* dprobs,
                             void* dscores, DType t);

}  // namespace moebench
