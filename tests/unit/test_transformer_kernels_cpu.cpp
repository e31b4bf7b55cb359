// The transformer's new ops on the CPU: LayerNorm, the causal softmax of attention and the
// softmax cross-entropy, against direct double-precision formulas and their gradients against
// central finite differences of a scalar loss; the token-major / head-major swap.
#include <gtest/gtest.h>
#include <cmath>
#include <functional>
#include <random>
#include <vector>
#include "kernels/causal_softmax.h"
#include "kernels/cross_entropy.h"
#include "kernels/layernorm.h"
#include "kernels/swap_dims.h"
#include "moe_test_util.h"

namespace moebench {
namespace {
using testing_util::normals;
using testing_util::rel_l2;

// d loss / d x by central differences, x perturbed in place.
std::vector<double> numeric_grad(std::vector<float>& x, const std::function<double()>& loss, float h = 1e-2f) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + h;
    const double up = loss();
    x[i] = keep - h;
    const double down = loss();
    x[i] = keep;
    g[i] = (up - down) / (2.0 * h);
  }
  return g;
}

TEST(LayerNormCpu, ForwardNormalisesEachRowAndBackwardMatchesFiniteDifferences) {
  const LayerNormShape s{5, 12};
  auto x = normals(60, 1, 2.f), gamma = normals(12, 2), beta = normals(12, 3), w = normals(60, 4);
  for (auto& v : x) v += 3.f;  // a mean far from 0
  std::vector<float> y(60), mean(5), rstd(5);
  layernorm_forward_cpu(s, x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data());
  std::vector<double> want(60);
  for (int r = 0; r < 5; ++r) {
    double mu = 0, var = 0;
    for (int c = 0; c < 12; ++c) mu += x[r * 12 + c] / 12.0;
    for (int c = 0; c < 12; ++c) var += (x[r * 12 + c] - mu) * (x[r * 12 + c] - mu) / 12.0;
    for (int c = 0; c < 12; ++c) want[r * 12 + c] = (x[r * 12 + c] - mu) / std::sqrt(var + kLayerNormEps) * gamma[c] + beta[c];
    EXPECT_NEAR(mean[r], mu, 1e-5);
  }
  EXPECT_LT(rel_l2(y, want), 1e-6);

  // L = sum(y w): dy = w.
  auto loss = [&] {
    std::vector<float> yy(60), m(5), rs(5);
    layernorm_forward_cpu(s, x.data(), gamma.data(), beta.data(), yy.data(), m.data(), rs.data());
    double l = 0;
    for (int i = 0; i < 60; ++i) l += double(yy[i]) * w[i];
    return l;
  };
  std::vector<float> dx(60), dgamma(12, 0.f), dbeta(12, 0.f);
  layernorm_backward_cpu(s, x.data(), w.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(), dbeta.data());
  EXPECT_LT(rel_l2(dx, numeric_grad(x, loss)), 2e-3);
  EXPECT_LT(rel_l2(dgamma, numeric_grad(gamma, loss)), 2e-3);
  EXPECT_LT(rel_l2(dbeta, numeric_grad(beta, loss)), 2e-3);
  // The parameter gradients accumulate (micro-batches add up); dx does not.
  const auto once = dgamma;
  layernorm_backward_cpu(s, x.data(), w.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(), dbeta.data());
  for (int c = 0; c < 12; ++c) EXPECT_FLOAT_EQ(dgamma[c], 2 * once[c]);
}

TEST(CausalSoftmaxCpu, RowsSeeOnlyTheirPastAndBackwardMatchesFiniteDifferences) {
  const CausalSoftmaxShape s{3, 6, 0.5f};
  auto scores = normals(108, 5, 3.f), w = normals(108, 6);
  std::vector<float> p(108);
  causal_softmax_forward_cpu(s, scores.data(), p.data());
  for (int r = 0; r < 18; ++r) {
    const int i = r % 6;
    double sum = 0, denom = 0;
    for (int j = 0; j <= i; ++j) denom += std::exp(0.5 * scores[r * 6 + j]);
    for (int j = 0; j < 6; ++j) {
      if (j > i) {
        EXPECT_EQ(p[r * 6 + j], 0.f) << "row " << r << " sees its future";
      } else {
        EXPECT_NEAR(p[r * 6 + j], std::exp(0.5 * scores[r * 6 + j]) / denom, 1e-6);
      }
      sum += p[r * 6 + j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  auto loss = [&] {
    std::vector<float> pp(108);
    causal_softmax_forward_cpu(s, scores.data(), pp.data());
    double l = 0;
    for (int i = 0; i < 108; ++i) l += double(pp[i]) * w[i];
    return l;
  };
  std::vector<float> ds(108);
  causal_softmax_backward_cpu(s, p.data(), w.data(), ds.data());
  EXPECT_LT(rel_l2(ds, numeric_grad(scores, loss, 1e-3f)), 2e-3);
  // In place: dscores over dprobs.
  std::vector<float> inplace = w;
  causal_softmax_backward(Exec{}, s, p.data(), inplace.data(), inplace.data(), DType::f32);
  EXPECT_EQ(inplace, ds);
}

TEST(CrossEntropyCpu, LossIsTheLogSumExpGapAndTheGradientMatchesFiniteDifferences) {
  const int rows = 4, vocab = 9;
  const CrossEntropyShape s{rows, vocab, 0.25f};
  auto logits = normals(rows * vocab, 7, 2.f);
  for (int v = 0; v < vocab; ++v) logits[v] += 40.f;  // large logits: the max is taken out first
  const std::vector<std::int32_t> targets = {3, 0, 8, 5};
  std::vector<float> losses(rows), d(rows * vocab);
  cross_entropy_cpu(s, logits.data(), targets.data(), losses.data(), d.data());
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int v = 0; v < vocab; ++v) sum += std::exp(double(logits[r * vocab + v]) - 40.0);
    EXPECT_NEAR(losses[r], std::log(sum) + 40.0 - logits[r * vocab + targets[r]], 1e-4) << "row " << r;
  }
  auto loss = [&] {
    std::vector<float> l(rows), dd(rows * vocab);
    cross_entropy_cpu(s, logits.data(), targets.data(), l.data(), dd.data());
    double total = 0;
    for (float x : l) total += 0.25 * x;
    return total;
  };
  EXPECT_LT(rel_l2(d, numeric_grad(logits, loss, 1e-2f)), 3e-3);
  // In place, and a target outside the vocabulary is refused.
  std::vector<float> inplace = logits, l2(rows);
  cross_entropy(Exec{}, s, inplace.data(), targets.data(), l2.data(), inplace.data(), DType::f32);
  EXPECT_EQ(inplace, d);
  EXPECT_EQ(l2, losses);
  const std::vector<std::int32_t> bad = {3, 0, 9, 5};
  EXPECT_THROW(cross_entropy_cpu(s, logits.data(), bad.data(), losses.data(), d.data()), Error);
}

// [outer, inner, width] -> [inner, outer, width]: every vector lands where its indices say, and
// swapping back gives the input.
TEST(SwapDimsCpu, MovesEachVectorToTheSwappedIndicesAndBack) {
  const int outer = 5, inner = 3, width = 7;
  std::vector<std::uint16_t> src(std::size_t(outer) * inner * width), dst(src.size(), 0), back(src.size(), 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::uint16_t(i * 37 + 11);
  swap_dims(Exec{}, outer, inner, width, 2, src.data(), dst.data());
  for (int o = 0; o < outer; ++o)
    for (int i = 0; i < inner; ++i)
      for (int c = 0; c < width; ++c)
        ASSERT_EQ(dst[(std::size_t(i) * outer + o) * width + c], src[(std::size_t(o) * inner + i) * width + c]) << o << i << c;
  swap_dims(Exec{}, inner, outer, width, 2, dst.data(), back.data());
  EXPECT_EQ(back, src);
  EXPECT_THROW(swap_dims(Exec{}, outer, inner, width, 2, src.data(), src.data() + 1), Error);  // overlap
  EXPECT_THROW(swap_dims(Exec{}, outer, inner, 0, 2, src.data(), dst.data()), Error);
}

TEST(TransformerKernelsCpu, BadShapesAndNonFloatsAreRefused) {
  float x = 0;
  EXPECT_THROW(layernorm_forward(Exec{}, {2, 0}, &x, &x, &x, &x, &x, &x, DType::f32), Error);
  EXPECT_THROW(layernorm_forward(Exec{}, {1, 1}, &x, &x, &x, &x, &x, &x, DType::i32), Error);
  EXPECT_THROW(causal_softmax_forward(Exec{}, {1, 0, 1.f}, &x, &x, DType::f32), Error);
  EXPECT_THROW(causal_softmax_forward(Exec{}, {1, 1, NAN}, &x, &x, DType::f32), Error);
  std::int32_t t = 0;
  EXPECT_THROW(cross_entropy(Exec{}, {1, 0, 1.f}, &x, &t, &x, &x, DType::f32), Error);
  EXPECT_THROW(cross_entropy(Exec{}, {1, 1, 1.f}, &x, &t, &x, &x, DType::i64), Error);
}

}  // namespace
}  // namespace moebench
