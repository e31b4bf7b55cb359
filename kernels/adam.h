// One AdamW step (Loshchilov and Hutter; M6-T trains with it) on fp32 master weights:
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   w = w - lr (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd w)
// The gradient g is in the model's dtype; `weights` (the model's copy, in that dtype) receives
// the updated master rounded to it, and may be the master itself when the dtype is fp32. The CPU
// backend holds 16-bit values as their bits (kernels/convert.h) and computes in fp32 as CUDA does.
#pragma once
#include <cstddef>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

struct AdamStep {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
  int step = 1;  // 1-based, for the bias corrections
};

void adam_step_cpu(std::size_t n, const AdamStep& a, float* master, float* m, float* v, const float* grad);
void adam_step_cuda(std::size_t n, const AdamStep& a, float* master, float* m, float* v, const void* grad, void* weights,
                    DType t, void* stream);
void adam_step(const Exec& ex, std::size_t n, const AdamStep& a, float* master, float* m, float* v, const void* grad,
               void* weights, DType t);

}  // namespace moebench
