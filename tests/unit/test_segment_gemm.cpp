// The segment GEMMs (kernels/segment_gemm.h) and their bounds from kept counts
// (kernels/segment_offsets.h) on the CPU: every segment against its own GEMM, empty segments,
// rows past the last bound left alone, the weights form's beta 0 writing without reading, and
// the refusals.
#include <gtest/gtest.h>
#include <cmath>
#include <vector>
#include "kernels/gelu_math.h"
#include "kernels/segment_gemm.h"
#include "kernels/segment_offsets.h"
#include "moe/dispatcher_rows.h"
#include "moe_test_util.h"

namespace moebench {
using namespace testing_util;

namespace {
// row-major op(A) op(B) of one problem, in double
std::vector<float> reference(bool ta, bool tb, int m, int n, int k, const float* a, const float* b) {
  std::vector<float> c(std::size_t(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int q = 0; q < k; ++q) s += double(ta ? a[q * m + i] : a[i * k + q]) * (tb ? b[j * k + q] : b[q * n + j]);
      c[std::size_t(i) * n + j] = float(s);
    }
  return c;
}
}  // namespace

TEST(SegmentGemm, RowsFormIsEachSegmentsGemmWithItsEpilogue) {
  const std::vector<std::int32_t> offset = {0, 3, 3, 10, 11};  // 3, 0, 7 and 1 rows
  const int S = 4, R = 11, bound = 13, k = 5, n = 6;
  const auto a = tokens(bound, k, 1);
  for (bool tb : {false, true})
    for (Epilogue ep : {Epilogue::none, Epilogue::gelu_aux, Epilogue::dgelu}) {
      SCOPED_TRACE(std::string(tb ? "trans_b " : "") + epilogue_name(ep));
      const auto b = tokens(S * k, n, 2);
      std::vector<float> c(std::size_t(bound) * n, NAN), aux = tokens(bound, n, 3);
      if (ep == Epilogue::gelu_aux) std::fill(aux.begin(), aux.end(), NAN);
      const std::vector<float> aux_in = aux;
      SegmentGemmArgs g;
      g.segments = S, g.offset = offset.data(), g.bound = bound, g.n = n, g.k = k, g.trans_b = tb;
      g.a = a.data(), g.b = b.data(), g.c = c.data(), g.stride_b = (long long)k * n;
      g.epilogue = ep, g.aux = ep == Epilogue::none ? nullptr : aux.data();
      segment_gemm(Exec{}, g);
      for (int e = 0; e < S; ++e) {
        const int first = offset[e], rows = offset[e + 1] - first;
        const auto p = reference(false, tb, rows, n, k, a.data() + first * k, b.data() + e * k * n);
        for (int i = 0; i < rows * n; ++i) {
          const std::size_t at = std::size_t(first) * n + i;
          const float want = ep == Epilogue::gelu_aux ? gelu_math::forward(p[i])
                             : ep == Epilogue::dgelu ? p[i] * gelu_math::derivative(aux_in[at])
                                                     : p[i];
          EXPECT_NEAR(c[at], want, 1e-5f) << "segment " << e;
          if (ep == Epilogue::gelu_aux) {
            EXPECT_NEAR(aux[at], p[i], 1e-5f);
          }
        }
      }
      for (std::size_t i = std::size_t(R) * n; i < c.size(); ++i) EXPECT_TRUE(std::isnan(c[i])) << "row past the bounds written";
    }
}

TEST(SegmentGemm, WeightsFormAccumulatesOrWritesWithoutReading) {
  const std::vector<std::int32_t> offset = {0, 4, 4, 9};  // 4, 0 and 5 rows
  const int S = 3, bound = 9, m = 3, n = 2;
  const auto a = tokens(bound, m, 4), b = tokens(bound, n, 5);
  for (float beta : {0.f, 1.f}) {
    SCOPED_TRACE("beta " + std::to_string(beta));
    std::vector<float> c = tokens(S * m, n, 6);
    if (beta == 0.f) std::fill(c.begin(), c.end(), NAN);  // beta 0 must not read C
    const std::vector<float> before = c;
    SegmentGemmArgs g;
    g.form = SegmentForm::weights;
    g.segments = S, g.offset = offset.data(), g.bound = bound, g.m = m, g.n = n, g.beta = beta;
    g.a = a.data(), g.b = b.data(), g.c = c.data(), g.stride_c = (long long)m * n;
    segment_gemm(Exec{}, g);
    for (int e = 0; e < S; ++e) {
      const int first = offset[e], rows = offset[e + 1] - first;
      const auto p = reference(true, false, m, n, rows, a.data() + first * m, b.data() + first * n);
      for (int i = 0; i < m * n; ++i) {
        const float want = p[i] + (beta == 0.f ? 0.f : before[e * m * n + i]);
        EXPECT_NEAR(c[e * m * n + i], want, 1e-5f) << "segment " << e << (rows == 0 ? " (empty)" : "");
      }
    }
  }
}

TEST(SegmentGemm, BoundsAreClampedAndBadArgumentsRefused) {
  const auto a = tokens(4, 2, 7), b = tokens(2, 2, 8);
  std::vector<float> c(8, NAN);
  const std::vector<std::int32_t> past = {0, 2, 9};  // the second segment runs past the 4 rows held
  SegmentGemmArgs g;
  g.segments = 2, g.offset = past.data(), g.bound = 4, g.n = 2, g.k = 2;
  g.a = a.data(), g.b = b.data(), g.c = c.data(), g.stride_b = 0;
  segment_gemm(Exec{}, g);
  for (float v : c) EXPECT_FALSE(std::isnan(v)) << "rows 2 and 3 belong to segment 1, clamped to the bound";
  const std::vector<std::int32_t> falling = {0, 3, 1};
  SegmentGemmArgs bad = g;
  bad.offset = falling.data();
  EXPECT_THROW(segment_gemm(Exec{}, bad), Error);
  bad = g;
  bad.beta = 1.f;  // the rows form overwrites
  EXPECT_THROW(segment_gemm(Exec{}, bad), Error);
  bad = g;
  bad.form = SegmentForm::weights, bad.m = 2, bad.epilogue = Epilogue::gelu_aux, bad.aux = c.data();
  EXPECT_THROW(segment_gemm(Exec{}, bad), Error);
  EXPECT_EQ(segment_gemm_unsupported(Backend::cpu, DType::f32, {3, 5}), "");
  EXPECT_NE(segment_gemm_unsupported(Backend::cuda, DType::f32, {16}).find("fp16 or bf16"), std::string::npos);
  EXPECT_NE(segment_gemm_unsupported(Backend::cuda, DType::bf16, {16, 36}).find("36 is not"), std::string::npos);
  EXPECT_EQ(segment_gemm_unsupported(Backend::cuda, DType::bf16, {16, 40}), "");
}

// The device's layout is the host's (moe/dispatcher_rows.h): expert by expert, group by group.
TEST(SegmentOffsets, AreTheExpertMajorBasesOfTheKeptCounts) {
  const int G = 2, E = 5;
  Routing r;
  r.shape.groups = G;
  r.shape.gate.experts = E;
  r.kept = {3, 0, 2, 7, 1,  //
            4, 1, 0, 0, 2};
  for (auto [first, count] : {std::pair{0, 5}, std::pair{1, 3}, std::pair{4, 1}}) {
    SCOPED_TRACE("experts " + std::to_string(first) + " + " + std::to_string(count));
    std::vector<std::int32_t> want_base;
    const std::vector<int> rows = expert_major_bases(r, first, count, want_base);
    std::vector<std::int32_t> base(G * E, 99), offset(count + 1, 99);
    segment_offsets(Exec{}, SegmentOffsetsArgs{G, E, first, count, r.kept.data(), base.data(), offset.data()});
    EXPECT_EQ(base, want_base);
    std::int32_t next = 0;
    for (int l = 0; l < count; ++l) {
      EXPECT_EQ(offset[l], next);
      next += rows[l];
    }
    EXPECT_EQ(offset[count], next);
  }
  std::vector<std::int32_t> base(G * E), offset(3);
  EXPECT_THROW(segment_offsets(Exec{}, SegmentOffsetsArgs{G, E, 4, 2, r.kept.data(), base.data(), offset.data()}), Error);
}

}  // namespace moebench
