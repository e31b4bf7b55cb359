#include "kernels/causal_softmax.h"
#include <algorithm>
#include <cmath>
#include <string>

namespace moebench {

void causal_softmax_forward_cpu(const CausalSoftmaxShape& s, const float* scores, float* probs) {
  const std::size_t rows = std::size_t(s.matrices) * s.seq;
  for (std::size_t r = 0; r < rows; ++r) {
    const int i = int(r % s.seq);
    const float* in = scores + r * s.seq;
    float* out = probs + r * s.seq;
    float mx = -INFINITY;
    for (int j = 0; j <= i; ++j) mx = std::max(mx, s.scale * in[j]);
    double sum = 0;
    for (int j = 0; j <= i; ++j) sum += std::exp(double(s.scale * in[j] - mx));
    for (int j = 0; j < s.seq; ++j) out[j] = j <= i ? float(std::exp(double(s.scale * in[j] - mx)) / sum) : 0.f;
  }
}

void causal_softmax_backward_cpu(const CausalSoftmaxShape& s, const float* probs, const float* dprobs, float* dscores) {
  const std::size_t rows = std::size_t(s.matrices) * s.seq;
  for (std::size_t r = 0; r < rows; ++r) {
    const int i = int(r % s.seq);
    const float *p = probs + r * s.seq, *dp = dprobs + r * s.seq;
    double dot = 0;
    for (int j = 0; j <= i; ++j) dot += double(p[j]) * dp[j];
    float* ds = dscores + r * s.seq;
    for (int j = 0; j < s.seq; ++j) ds[j] = j <= i ? float(s.scale * p[j] * (dp[j] - dot)) : 0.f;
  }
}

static void check(const CausalSoftmaxShape& s, DType t, const Exec& ex, const char* op) {
  if (s.matrices < 0 || s.seq < 1 || !std::isfinite(s.scale))
    throw Error(std::string(op) + ": " + std::to_string(s.matrices) + " matrices of " + std::to_string(s.seq) + " x " +
                std::to_string(s.seq) + " with scale " + std::to_string(s.scale));
  if (ex.backend == Backend::cpu && t != DType::f32)
    throw Error(std::string(op) + ": the CPU backend computes in fp32 only, not " + std::string(dtype_name(t)));
}

void causal_softmax_forward(const Exec& ex, const CausalSoftmaxShape& s, const void* scores, void* probs, DType t) {
  check(s, t, ex, "causal_softmax_forward");
  if (ex.backend == Backend::cuda) return causal_softmax_forward_cuda(s, scores, probs, t, ex.stream);
  run_host(ex, "causal_softmax_forward", [=] {
    causal_softmax_forward_cpu(s, static_cast<const float*>(scores), static_cast<float*>(probs));
  });
}

void causal_softmax_backward(const Exec& ex, const CausalSoftmaxShape& s, const void* probs, const void* dprobs,
                             void* dscores, DType t) {
  check(s, t, ex, "causal_softmax_backward");
  if (ex.backend == Backend::cuda) return causal_softmax_backward_cuda(s, probs, dprobs, dscores, t, ex.stream);
  run_host(ex, "causal_softmax_backward", [=] {
    causal_softmax_backward_cpu(s, static_cast<const float*>(probs), static_cast<const float*>(dprobs),
                                static_cast<float*>(dscores));
  });
}

#if !MOEBENCH_WITH_CUDA
void causal_softmax_forward_cuda(const CausalSoftmaxShape&, const void*, void*, DType, void*) {
  cuda_not_built("causal_softmax_forward");
}
void causal_softmax_backward_cuda(const CausalSoftmaxShape&, const void*, const void*, void*, DType, void*) {
  cuda_not_built("causal_softmax_backward");
}
#endif

}  // namespace moebench
