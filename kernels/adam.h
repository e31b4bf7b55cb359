// One AdamW step (Loshchilov and Hutter; M6-T trains with it) on fp32 master weights:
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   w = w - lr (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd w)
// The gradient g, in its own dtype, is first multiplied by AdamStep::grad_scale (a loss scaled up
// for fp16 is scaled back here). `weights` (the model's copy, in its dtype) receives the updated
// master rounded to it, and may be the master itself when the dtype is fp32. One pass: the
// gradient is read, the master and moments updated and the weight written by the same kernel,
// with no widened copy of the gradient and no separate rounding pass. The CPU backend holds
// 16-bit values as their bits (kernels/convert.h) and computes in fp32 as CUDA does.
#pragma once
#include <cstddef>
#include <cstdint>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

struct AdamStep {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
  int step = 1;            // 1-based, for the bias corrections
  float grad_scale = 1.f;  // the gradient's multiplier
  // Where set, the step is read from this int in device memory when the update runs instead of
  // `step`: a step captured into a graph (runtime/stream_graph.h) and replayed counts its own.
  const std::int32_t* step_count = nullptr;
};

// Adds one to a step count in device memory, in stream order.
void adam_count_step(const Exec& ex, std::int32_t* step_count);
void adam_count_step_cuda(std::int32_t* step_count, void* stream);

void adam_step_cpu(std::size_t n, const AdamStep& a, float* master, float* m, float* v, const float* grad);
void adam_step_cuda(std::size_t n, const AdamStep& a, float* master, float* m, float* v, const void* grad, DType grad_t,
                    void* weights, DType t, void* stream);
// `grad` in `grad_t`, `weights` in `t` (fp32, fp16 or bf16 each).
void adam_step(const Exec& ex, std::size_t n, const AdamStep& a, float* master, float* m, float* v, const void* grad,
               DType grad_t, void* weights, DType t);
// The gradient in the weights' dtype.
inline void adam_step(const Exec& ex, std::size_t n, const AdamStep& a, float* master, float* m, float* v,
                      const void* grad, void* weights, DType t) {
  adam_step(ex, n, a, master, m, v, grad, t, weights, t);
}

}  // namespace moebench
