// Softmax cross-entropy of a language model's logits against the next tokens, forward and
// backward in one pass (the logits are the largest tensor of a step; read them once):
//   loss[r] = log sum_v exp(logits[r, v]) - logits[r, target[r]]
//   dlogits[r, v] = grad_scale (softmax(logits[r])[v] - [v == target[r]])
// grad_scale is dL/dloss[r] (1 / tokens for the mean). Logits and their gradient in
// fp32/fp16/bf16 (dlogits may alias logits), targets int32 in [0, vocab), losses fp32.
#pragma once
#include <cstddef>
#include <cstdint>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

struct CrossEntropyShape {
  int rows = 0, vocab = 0;
  float grad_scale = 1.f;
};

void cross_entropy_cpu(const CrossEntropyShape& s, const float* logits, const std::int32_t* targets, float* losses,
                       float* dlogits);
void cross_entropy_cuda(const CrossEntropyShape& s, const void* logits, const std::int32_t* targets, float* losses,
                        void* dlogits, DType t, void* stream);
void cross_entropy(const Exec& ex, const CrossEntropyShape& s, const void* logits, const std::int32_t* targets, float* losses,
                   void* dlogits, DType t);

}  // namespace moebench
