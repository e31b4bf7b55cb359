#include <gtest/gtest.h>
#include <cmath>
#include <random>
#include <vector>
#include "kernels/adam.h"
#include "kernels/convert.h"
#include "kernels/gelu.h"
#include "kernels/gelu_math.h"
#include "kernels/gemm.h"
#include "kernels/pad_rows.h"
#include "moe_test_util.h"

namespace moebench {

using testing_util::normals;

TEST(GemmCpu, MatchesNaiveProductForEveryTransposeCombination) {
  const int m = 7, n = 5, k = 9;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const auto a = normals(std::size_t(m) * k, 1), b = normals(std::size_t(k) * n, 2);
      std::vector<float> c(std::size_t(m) * n, 1.f);
      GemmArgs g = dense_gemm(ta, tb, m, n, k, a.data(), b.data(), c.data(), DType::f32, 0.5f, 2.f);
      gemm(Exec{}, g);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double want = 2.0;  // beta * C with C = 1
          for (int p = 0; p < k; ++p) {
            const float av = ta ? a[std::size_t(p) * m + i] : a[std::size_t(i) * k + p];
            const float bv = tb ? b[std::size_t(j) * k + p] : b[std::size_t(p) * n + j];
            want += 0.5 * av * bv;
          }
          EXPECT_NEAR(c[std::size_t(i) * n + j], want, 1e-4) << "ta=" << ta << " tb=" << tb;
        }
    }
}

TEST(GemmCpu, RejectsNonFloatsAndNegativeSizes) {
  float x = 0;
  EXPECT_THROW(gemm(Exec{}, dense_gemm(false, false, 1, 1, 1, &x, &x, &x, DType::i32)), Error);
  EXPECT_THROW(gemm(Exec{}, dense_gemm(false, false, -1, 1, 1, &x, &x, &x)), Error);
}

TEST(GeluCpu, ForwardMatchesKnownValues) {
  const float x[] = {-3.f, -1.f, 0.f, 0.5f, 2.f};
  float y[5];
  gelu_forward_cpu(x, y, 5);
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  const double want[] = {-0.0036373920817729943, -0.15880800939172324, 0.0, 0.34571400982514394, 1.9545976940871754};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(y[i], want[i], 1e-6) << x[i];
}

TEST(GeluCpu, TanhApproximationIsWithinFp32Rounding) {
  double worst = 0;
  for (int i = -200000; i <= 200000; ++i) {
    const float x = float(i) * 1e-4f;  // [-20, 20]
    worst = std::max(worst, std::fabs(double(gelu_math::tanh_approx(x)) - std::tanh(double(x))));
  }
  EXPECT_LT(worst, 1e-6);
}

// The logistic form the GPU's 16-bit kernels take (with the hardware's exp2 and reciprocal, a
// few ulps off the exact ones used here) against GeLU and its derivative in double: relative
// to the value down to 1e-12 (below it, where a is clamped, the tail is within 1e-18 of GeLU).
TEST(GeluCpu, TheLogisticFormIsGeluAndItsDerivative) {
  const double c = 0.7978845608028654, k = 0.044715, ulp = std::ldexp(1.0, -24);
  double worst_forward = 0, worst_derivative = 0, worst_against_rational = 0;
  for (int i = -120000; i <= 120000; ++i) {
    const float x = float(i) * 1e-4f;  // [-12, 12]
    const double xd = x, u = c * (xd + k * xd * xd * xd), s = 1 / (1 + std::exp(-2 * u));
    const double f = xd * s, df = s + 2 * xd * c * (1 + 3 * k * xd * xd) * s * (1 - s);
    // e = exp(-2u) inherits the fp32 rounding of its exponent times |2u|: ulps scaled by 1 + |2u|.
    const double scale = ulp * (1 + std::fabs(2 * u));
    worst_forward = std::max(worst_forward, std::fabs(gelu_math::forward_logistic(x) - f) / std::max(std::fabs(f), 1e-12) / scale);
    worst_derivative = std::max(worst_derivative, std::fabs(gelu_math::derivative_logistic(x) - df) / std::max(std::fabs(df), 0.1) / scale);
    worst_against_rational = std::max(worst_against_rational, std::fabs(double(gelu_math::forward_logistic(x)) - gelu_math::forward(x)));
  }
  EXPECT_LT(worst_forward, 8);  // in fp32 ulps, scaled
  EXPECT_LT(worst_derivative, 8);
  EXPECT_LT(worst_against_rational, 4e-6);
  EXPECT_EQ(gelu_math::forward_logistic(0.f), 0.f);
  EXPECT_EQ(gelu_math::derivative_logistic(0.f), 0.5f);
  for (float x : {-1e4f, -60.f, 60.f, 1e4f}) {  // beyond the clamp: saturated, finite
    EXPECT_NEAR(gelu_math::forward_logistic(x), x > 0 ? x : 0.f, 1e-12f * std::fabs(x)) << x;
    EXPECT_NEAR(gelu_math::derivative_logistic(x), x > 0 ? 1.f : 0.f, 1e-6f) << x;
  }
}

// In the padded experts' layout: the expert rows (at the starts of their blocks, and an
// overflowing expert's in the overflow) get GeLU's gradient; the padding rows are not touched.
TEST(GeluCpu, TheGradientInBlocksTakesTheExpertRowsAlone) {
  const int width = 5, padded = 4;
  const RowPadding p{row_offsets({3, 0, 6, 2}), padded, width, DType::f32};  // expert 2 overflows
  const std::vector<std::size_t> start = padded_starts(p.offset, padded);
  ASSERT_EQ(start.back(), std::size_t(4 * padded + 6));
  const std::size_t n = start.back() * width;
  const std::vector<float> x = normals(n, 5);
  std::vector<float> d(n, 7.f), want(n, 7.f);  // 7: padding, unread and unwritten
  const std::vector<float> dy = normals(n, 6);
  for (int e = 0; e < p.experts(); ++e) {
    const std::size_t first = start[e] * width, count = p.rows(e) * width;
    std::copy(dy.begin() + first, dy.begin() + first + count, d.begin() + first);
    gelu_backward_cpu(x.data() + first, dy.data() + first, want.data() + first, count);
  }
  gelu_backward_in_blocks(Exec{}, p, x.data(), d.data());
  EXPECT_EQ(d, want);
  EXPECT_THROW(gelu_backward_in_blocks(Exec{}, RowPadding{{}, padded, width, DType::f32}, x.data(), d.data()), Error);
}

TEST(GeluCpu, BackwardMatchesFiniteDifferences) {
  const auto x = normals(64, 3), dy = normals(64, 4);
  std::vector<float> dx(64);
  gelu_backward_cpu(x.data(), dy.data(), dx.data(), 64);
  for (int i = 0; i < 64; ++i) {
    const double h = 1e-3;
    float xp = x[i] + float(h), xm = x[i] - float(h), yp, ym;
    gelu_forward_cpu(&xp, &yp, 1);
    gelu_forward_cpu(&xm, &ym, 1);
    EXPECT_NEAR(dx[i], dy[i] * (double(yp) - ym) / (double(xp) - xm), 2e-3) << "x=" << x[i];
  }
}

TEST(Convert, RoundsToHalfAndBfloat16Exactly) {
  EXPECT_EQ(round_to(DType::f16, 1.0f), 1.0f);
  EXPECT_EQ(round_to(DType::f16, 1.0f + 1.0f / 4096), 1.0f);           // below half an ulp (2^-10)
  EXPECT_EQ(round_to(DType::f16, 1.0f + 3.0f / 2048), 1.0f + 1.0f / 512); // ties go to even
  EXPECT_EQ(round_to(DType::f16, 70000.f), INFINITY);
  EXPECT_EQ(round_to(DType::f16, 1e-8f), 0.0f);
  EXPECT_EQ(round_to(DType::f16, 3e-6f), std::ldexp(50.f, -24));  // subnormal spacing 2^-24
  EXPECT_EQ(round_to(DType::bf16, 1.0f + 1.0f / 256), 1.0f);             // tie to even
  EXPECT_EQ(round_to(DType::bf16, 1.0f + 3.0f / 256), 1.0f + 1.0f / 64);
  EXPECT_EQ(round_to(DType::f32, 0.1f), 0.1f);
}

// AdamW on two steps worked by hand: step 1's bias-corrected moments are g and g^2, so the
// update is lr (sign(g) + wd w); step 2 mixes the two gradients.
TEST(Adam, TwoStepsMatchTheHandComputedUpdate) {
  AdamStep a;
  a.lr = 0.1f; a.beta1 = 0.9f; a.beta2 = 0.99f; a.eps = 0.f; a.weight_decay = 0.5f;
  std::vector<float> w = {1.f, -2.f}, m(2, 0.f), v(2, 0.f);
  const std::vector<float> g1 = {0.5f, -4.f}, g2 = {-1.f, 2.f};
  a.step = 1;
  adam_step(Exec{}, 2, a, w.data(), m.data(), v.data(), g1.data(), w.data(), DType::f32);
  EXPECT_NEAR(w[0], 1.f - 0.1f * (1.f + 0.5f * 1.f), 1e-6);
  EXPECT_NEAR(w[1], -2.f - 0.1f * (-1.f + 0.5f * -2.f), 1e-6);
  const std::vector<double> w1 = {w[0], w[1]};
  a.step = 2;
  adam_step(Exec{}, 2, a, w.data(), m.data(), v.data(), g2.data(), w.data(), DType::f32);
  for (int i = 0; i < 2; ++i) {
    const double mi = 0.9 * 0.1 * g1[i] + 0.1 * g2[i], vi = 0.99 * 0.01 * g1[i] * g1[i] + 0.01 * g2[i] * g2[i];
    const double want = w1[i] - 0.1 * ((mi / (1 - 0.81)) / std::sqrt(vi / (1 - 0.9801)) + 0.5 * w1[i]);
    EXPECT_NEAR(w[i], want, 1e-5) << i;
  }
  EXPECT_THROW(adam_step(Exec{}, 2, a, w.data(), m.data(), v.data(), g2.data(), w.data(), DType::i32), Error);
}

}  // namespace moebench
