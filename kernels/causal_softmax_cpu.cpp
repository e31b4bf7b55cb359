#include "kernels/causal_softmax.h"
#include "kernels/host_widen.h"
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

static void check(const CausalSoftmaxShape& s, DType t, const char* op) {
  if (s.matrices < 0 || s.seq < 1 || !std::isfinite(s.scale))
    throw Error(std::string(op) + ": " + std::to_string(s.matrices) + " matrices of " + std::to_string(s.seq) + " x " +
                std::to_string(s.seq) + " with scale " + std::to_string(s.scale));
  if (!is_float(t)) throw Error(std::string(op) + ": " + std::string(dtype_name(t)) + " data; allowed: fp32, fp16 and bf16");
}

void causal_softmax_forward(const Exec& ex, const CausalSoftmaxShape& s, const void* scores, void* probs, DType t) {
  check(s, t, "causal_softmax_forward");
  if (ex.backend == Backend::cuda) return causal_softmax_forward_cuda(s, scores, probs, t, ex.stream);
  run_host(ex, "causal_softmax_forward", [=] {
    const std::size_t n = std::size_t(s.matrices) * s.seq * s.seq;
    WidenedView in(scores, t, n, true), out(probs, t, n, false);
    causal_softmax_forward_cpu(s, in.data(), out.data());
    out.narrow();
  });
}

void causal_softmax_backward(const Exec& ex, const CausalSoftmaxShape& s, const void* probs, const void* dprobs,
                             void* dscores, DType t) {
  check(s, t, "causal_softmax_backward");
  if (ex.backend == Backend::cuda) return causal_softmax_backward_cuda(s, probs, dprobs, dscores, t, ex.stream);
  run_host(ex, "causal_softmax_backward", [=] {
    const std::size_t n = std::size_t(s.matrices) * s.seq * s.seq;
    WidenedView p(probs, t, n, true), dp(dprobs, t, n, true), out(dscores, t, n, false);
    causal_softmax_backward_cpu(s, p.data(), dp.data(), out.data());
    out.narrow();
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
