#include "kernels/cross_entropy.h"
#include "kernels/host_widen.h"
#include <algorithm>
#include <cmath>
#include <string>

namespace moebench {

void cross_entropy_cpu(const CrossEntropyShape& s, const float* logits, const std::int32_t* targets, float* losses,
                       float* dlogits) {
  for (int r = 0; r < s.rows; ++r) {
    const float* l = logits + std::size_t(r) * s.vocab;
    const int t = targets[r];
    if (t < 0 || t >= s.vocab)
      throw Error("cross_entropy: target " + std::to_string(t) + " of row " + std::to_string(r) + " is outside the vocabulary of " +
                  std::to_string(s.vocab));
    const float mx = *std::max_element(l, l + s.vocab);
    double sum = 0;
    for (int v = 0; v < s.vocab; ++v) sum += std::exp(double(l[v] - mx));
    const float target_logit = l[t];
    losses[r] = float(std::log(sum) + mx - target_logit);
    float* d = dlogits + std::size_t(r) * s.vocab;  // may be l itself: each element read before written
    for (int v = 0; v < s.vocab; ++v) d[v] = float(s.grad_scale * (std::exp(double(l[v] - mx)) / sum - (v == t ? 1.0 : 0.0)));
  }
}

void cross_entropy(const Exec& ex, const CrossEntropyShape& s, const void* logits, const std::int32_t* targets, float* losses,
                   void* dlogits, DType t) {
  if (s.rows < 0 || s.vocab < 1 || !std::isfinite(s.grad_scale))
    throw Error("cross_entropy: " + std::to_string(s.rows) + " rows over a vocabulary of " + std::to_string(s.vocab));
  if (ex.backend == Backend::cuda) return cross_entropy_cuda(s, logits, targets, losses, dlogits, t, ex.stream);
  run_host(ex, "cross_entropy", [=] {
    const std::size_t n = std::size_t(s.rows) * s.vocab;
    WidenedView in(logits, t, n, true), out(dlogits, t, n, false);
    cross_entropy_cpu(s, in.data(), targets, losses, out.data());
    out.narrow();
  });
}

#if !MOEBENCH_WITH_CUDA
void cross_entropy_cuda(const CrossEntropyShape&, const void*, const std::int32_t*, float*, void*, DType, void*) {
  cuda_not_built("cross_entropy");
}
#endif

}  // namespace moebench
