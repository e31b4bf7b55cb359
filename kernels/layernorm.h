// LayerNorm over the last dimension (the transformer's pre-norm), forward and backward:
//   mean, rstd = 1 / sqrt(var + eps) per row;  y = (x - mean) rstd gamma + beta
//   dx = rstd (dy gamma - mean(dy gamma) - xhat mean(dy gamma xhat)),  xhat = (x - mean) rstd
//   dgamma += sum over rows of dy xhat;  dbeta += sum over rows of dy   (accumulated: micro-batches add up)
// x, y, dy, dx in fp32/fp16/bf16; gamma, beta, their gradients and the saved mean and rstd in
// fp32. CPU: fp32 with double sums. CUDA: one block per row, fp32 arithmetic.
#pragma once
#include <cstddef>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

inline constexpr float kLayerNormEps = 1e-5f;

struct LayerNormShape {
  int rows = 0, cols = 0;
};

void layernorm_forward_cpu(const LayerNormShape& s, const float* x, const float* gamma, const float* beta, float* y,
                           float* mean, float* rstd);
void layernorm_backward_cpu(const LayerNormShape& s, const float* x, const float* dy, const float* gamma, const float* mean,
                            const float* rstd, float* dx, float* dgamma, float* dbeta);
void layernorm_forward_cuda(const LayerNormShape& s, const void* x, const float* gamma, const float* beta, void* y,
                            float* mean, float* rstd, DType t, void* stream);
void layernorm_backward_cuda(const LayerNormShape& s, const void* x, const void* dy, const float* gamma, const float* mean,
                             const float* rstd, void* dx, float* dgamma, float* dbeta, DType t, void* stream);

void layernorm_forward(const Exec& ex, const LayerNormShape& s, const void* x, const float* gamma, const float* beta,
                       void* y, float* mean, float* rstd, DType t);
void layernorm_backward(const Exec& ex, const LayerNormShape& s, const void* x, const void* dy, const float* gamma,
                        const float* mean, const float* rstd, void* dx, float* dgamma, float* dbeta, DType t);

}  // namespace moebench
