// Blocked causal attention on the CPU: its panel ops against the whole-row softmax, the layer
// against the materialized layer (outputs and every gradient, panels of 1, of uneven sizes and
// of the whole sequence), its mechanism (no [seq, seq] tensor kept, the keys no row sees
// skipped), and the GPT step through it.
#include <gtest/gtest.h>
#include <cmath>
#include <random>
#include <vector>
#include "kernels/attention_panels.h"
#include "kernels/causal_softmax.h"
#include "attention_run.h"
#include "moe_test_util.h"
#include "gpt/attention.h"
#include "gpt/gpt_model.h"
#include "gpt/typed_upload.h"
#include "timeline_util.h"

namespace moebench {
using testing_util::host_values;
using testing_util::normals;
using testing_util::rel_l2;
using testing_util::AttentionRun;
using testing_util::expect_close;
using testing_util::run_attention;
namespace {

// Panels of any origin give the whole-row softmax's probabilities and gradients, from the
// statistics the forward panels left.
TEST(AttentionPanelsCpu, StatisticsReproduceTheWholeRowSoftmaxAndItsGradient) {
  const int heads = 2, seq = 9;
  const float scale = 0.37f;
  const auto scores = normals(std::size_t(heads) * seq * seq, 1), dprobs = normals(std::size_t(heads) * seq * seq, 2);
  std::vector<float> p(scores.size()), ds(scores.size());
  const CausalSoftmaxShape sm{heads, seq, scale};
  causal_softmax_forward_cpu(sm, scores.data(), p.data());
  causal_softmax_backward_cpu(sm, p.data(), dprobs.data(), ds.data());
  // D = rowsum(p o dp): what rowsum(dO o O) equals when O = P V and dP = dO V^T.
  std::vector<float> delta(std::size_t(heads) * seq, 0.f), stats(std::size_t(heads) * seq, NAN);
  for (std::size_t r = 0; r < delta.size(); ++r)
    for (int j = 0; j < seq; ++j) delta[r] += p[r * seq + j] * dprobs[r * seq + j];
  // Forward panels of rows [r0, r0 + rows) against keys [0, r0 + rows).
  auto panel_of = [&](const std::vector<float>& whole, int r0, int rows, int c0, int cols) {
    std::vector<float> out(std::size_t(heads) * rows * cols);
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j)
          out[(std::size_t(h) * rows + i) * cols + j] = whole[(std::size_t(h) * seq + r0 + i) * seq + c0 + j];
    return out;
  };
  for (int r0 : {0, 4, 7}) {
    const int rows = std::min(4, seq - r0), cols = r0 + rows;
    auto s = panel_of(scores, r0, rows, 0, cols);
    attention_panel_softmax_forward_cpu({heads, rows, cols, r0, 0, seq, scale}, s.data(), stats.data());
    const auto want = panel_of(p, r0, rows, 0, cols);
    for (std::size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(s[i], want[i], 1e-6f) << "forward panel at row " << r0;
  }
  for (float l : stats) EXPECT_TRUE(std::isfinite(l));
  // Backward panels: a key panel's rows from its first key on, and a row panel from key 0.
  struct Case { int r0, rows, c0, cols; };
  for (const Case c : {Case{3, 6, 3, 3}, Case{6, 3, 6, 3}, Case{2, 5, 0, 7}, Case{0, 9, 0, 9}}) {
    auto s = panel_of(scores, c.r0, c.rows, c.c0, c.cols), dp = panel_of(dprobs, c.r0, c.rows, c.c0, c.cols);
    attention_panel_softmax_backward_cpu({heads, c.rows, c.cols, c.r0, c.c0, seq, scale}, s.data(), dp.data(), stats.data(),
                                         delta.data());
    const auto want_p = panel_of(p, c.r0, c.rows, c.c0, c.cols), want_ds = panel_of(ds, c.r0, c.rows, c.c0, c.cols);
    for (std::size_t i = 0; i < s.size(); ++i) {
      EXPECT_NEAR(s[i], want_p[i], 1e-6f) << "backward panel rows " << c.r0 << " keys " << c.c0;
      EXPECT_NEAR(dp[i], want_ds[i], 1e-5f) << "backward panel rows " << c.r0 << " keys " << c.c0;
    }
  }
}

TEST(AttentionPanelsCpu, RowDotSumsEachHeadsColumnsOfEveryRow) {
  const int sequences = 2, seq = 3, heads = 2, d = 3, ld = 7;  // one spare column per row
  const auto g = normals(std::size_t(sequences) * seq * ld, 3), o = normals(std::size_t(sequences) * seq * ld, 4);
  std::vector<float> delta(std::size_t(sequences) * heads * seq);
  attention_row_dot_cpu(sequences, seq, heads, d, ld, g.data(), o.data(), delta.data());
  for (int b = 0; b < sequences; ++b)
    for (int i = 0; i < seq; ++i)
      for (int h = 0; h < heads; ++h) {
        double want = 0;
        for (int c = 0; c < d; ++c) want += double(g[(b * seq + i) * ld + h * d + c]) * o[(b * seq + i) * ld + h * d + c];
        EXPECT_NEAR(delta[(h * sequences + b) * seq + i], want, 1e-5) << b << " " << i << " " << h;
      }
}

TEST(AttentionPanelsCpu, PanelsOutsideTheSequenceAndForwardPanelsMissingKeysAreRefused) {
  const Exec ex;
  std::vector<float> buf(64), stats(16);
  EXPECT_THROW(attention_panel_softmax_forward(ex, {1, 4, 4, 2, 0, 8, 1.f}, buf.data(), stats.data(), DType::f32), Error);
  EXPECT_THROW(attention_panel_softmax_forward(ex, {1, 4, 4, 6, 0, 8, 1.f}, buf.data(), stats.data(), DType::f32), Error);
  EXPECT_THROW(attention_panel_softmax_backward(ex, {1, 4, 4, 2, 6, 8, 1.f}, buf.data(), buf.data(), stats.data(),
                                                stats.data(), DType::f32),
               Error);
  EXPECT_THROW(attention_panel_softmax_forward(ex, {1, 2, 2, 0, 0, 8, 1.f}, buf.data(), stats.data(), DType::i32), Error);
}

TEST(BlockedAttention, EqualsTheMaterializedAttentionForAnyPanelHeight) {
  const int sequences = 2, seq = 13;
  const AttentionRun want = run_attention(AttentionKernel::materialized, 128, DType::f32, sequences, seq);
  for (int panel : {1, 4, 5, 13, 128}) {
    const AttentionRun got = run_attention(AttentionKernel::blocked, panel, DType::f32, sequences, seq);
    expect_close(got, want, 2e-6, "panels of " + std::to_string(panel) + " rows");
  }
}

TEST(BlockedAttention, SixteenBitEqualsTheMaterializedAttentionWithinRounding) {
  for (DType t : {DType::bf16, DType::f16}) {
    const AttentionRun want = run_attention(AttentionKernel::materialized, 128, t, 2, 11);
    const AttentionRun got = run_attention(AttentionKernel::blocked, 4, t, 2, 11);
    // Both round Q K V, P, the context and dP / dS to t: about eight stores on the longest chain.
    expect_close(got, want, testing_util::sixteen_bit_tolerance(t, 8, 16), std::string(dtype_name(t)));
  }
}

// What the forward keeps: each row's statistic, never the [seq, seq] probabilities. Its score
// GEMMs are only as wide as the keys their rows see: a panel of rows [r0, r0 + rows) meets keys
// [0, r0 + rows), so the panels cover the causal triangle plus their own diagonal blocks.
TEST(BlockedAttention, KeepsRowStatisticsNotTheSquareAndSkipsTheKeysNoRowSees) {
  const int sequences = 2, seq = 13, heads = 3, panel = 4;
  std::vector<TimelineEntry> ops;
  const AttentionRun r = run_attention(AttentionKernel::blocked, panel, DType::f32, sequences, seq, heads, 4, true, &ops);
  EXPECT_EQ(r.kept_probs, 0u);
  EXPECT_EQ(r.kept_stats, std::size_t(sequences) * heads * seq * sizeof(float));
  long long area = 0, score_gemms = 0, softmaxes = 0;
  for (const TimelineEntry& e : ops) {
    if (e.range) continue;
    EXPECT_NE(e.name, "causal_softmax_forward");
    if (e.name == "attention_panel_softmax_forward") ++softmaxes;
    if (e.name != "batched_gemm" || testing_util::number_arg(e, "trans_b") != 1) continue;
    ++score_gemms;
    EXPECT_EQ(testing_util::number_arg(e, "batch"), heads * sequences) << e.args;  // every head of every sequence
    area += (long long)(testing_util::number_arg(e, "m") * testing_util::number_arg(e, "n"));
  }
  long long want_area = 0;
  for (int r0 = 0; r0 < seq; r0 += panel) want_area += (long long)std::min(panel, seq - r0) * std::min(seq, r0 + panel);
  const int panels = (seq + panel - 1) / panel;
  EXPECT_EQ(score_gemms, panels);
  EXPECT_EQ(softmaxes, panels);
  EXPECT_EQ(area, want_area);
  EXPECT_LT(want_area, (long long)seq * seq);

  const AttentionRun m = run_attention(AttentionKernel::materialized, panel, DType::f32, sequences, seq, heads);
  EXPECT_EQ(m.kept_probs, std::size_t(sequences) * heads * seq * seq * sizeof(float));
  EXPECT_EQ(m.kept_stats, 0u);
}

TEST(BlockedAttention, TheDefaultOnTheCpuIsTheMaterializedReference) {
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc(Backend::cpu);
  AttentionConfig cfg{8, 2, 4, 0, 0, DType::f32};
  EXPECT_EQ(CausalSelfAttention(cfg, dev, alloc).kernel(), AttentionKernel::materialized);
  cfg.kernel = AttentionKernel::blocked;
  EXPECT_EQ(CausalSelfAttention(cfg, dev, alloc).kernel(), AttentionKernel::blocked);
  cfg.panel_rows = 0;
  EXPECT_THROW(CausalSelfAttention(cfg, dev, alloc), Error);
  EXPECT_EQ(parse_attention_kernel("blocked"), AttentionKernel::blocked);
  EXPECT_EQ(parse_attention_kernel("materialized"), AttentionKernel::materialized);
  EXPECT_FALSE(parse_attention_kernel("by_backend").has_value());
}

// The whole model's loss and gradients through blocked attention equal the materialized model's.
TEST(BlockedAttention, GptStepEqualsTheMaterializedModels) { testing_util::expect_same_gpt_step(AttentionKernel::blocked, 4); }

}  // namespace
}  // namespace moebench
