// The MoE ops' CPU references on hand-worked examples.
#include <gtest/gtest.h>
#include <cmath>
#include <numeric>
#include "kernels/aux_loss.h"
#include "kernels/capacity.h"
#include "kernels/gating.h"
#include "kernels/permute.h"
#include "moe/gate.h"

namespace moebench {

TEST(SoftmaxTopk, ProbabilitiesAndChoicesPerPrototype) {
  // 1 token, 6 experts in 2 prototypes of 3; top-2 inside each.
  GateShape g{1, 6, 2, 2};
  const float logits[6] = {0.f, 2.f, 1.f, /**/ 3.f, 3.f, -1.f};
  float probs[6], weight[4];
  std::int32_t expert[4];
  softmax_topk_cpu(g, logits, probs, expert, weight);
  const double z0 = 1 + std::exp(2.0) + std::exp(1.0), z1 = 2 * std::exp(3.0) + std::exp(-1.0);
  EXPECT_NEAR(probs[1], std::exp(2.0) / z0, 1e-6);
  EXPECT_NEAR(probs[3], std::exp(3.0) / z1, 1e-6);
  EXPECT_NEAR(probs[0] + probs[1] + probs[2], 1.0, 1e-6);
  EXPECT_NEAR(probs[3] + probs[4] + probs[5], 1.0, 1e-6);
  EXPECT_EQ(expert[0], 1);  // prototype 0: best, then second best
  EXPECT_EQ(expert[1], 2);
  EXPECT_EQ(expert[2], 3);  // prototype 1: a tie goes to the lower index
  EXPECT_EQ(expert[3], 4);
  EXPECT_FLOAT_EQ(weight[0], probs[1]);
  EXPECT_FLOAT_EQ(weight[3], probs[4]);
}

TEST(SoftmaxTopk, BackwardMatchesFiniteDifferences) {
  GateShape g{2, 6, 2, 1};
  const float logits[12] = {0.3f, -1.f, 2.f, 0.5f, 0.1f, -0.2f, 1.f, 1.5f, -0.5f, 0.f, 0.7f, 2.f};
  const float dprobs[12] = {1.f, -2.f, 0.5f, 0.f, 3.f, 1.f, -1.f, 0.25f, 2.f, 1.f, -0.5f, 0.3f};
  float probs[12], weight[4], dlogits[12];
  std::int32_t expert[4];
  softmax_topk_cpu(g, logits, probs, expert, weight);
  softmax_backward_cpu(g, probs, dprobs, dlogits);
  for (int i = 0; i < 12; ++i) {
    float lp[12], lm[12], pp[12], pm[12];
    std::copy(logits, logits + 12, lp);
    std::copy(logits, logits + 12, lm);
    lp[i] += 1e-3f;
    lm[i] -= 1e-3f;
    softmax_topk_cpu(g, lp, pp, expert, weight);
    softmax_topk_cpu(g, lm, pm, expert, weight);
    double num = 0;
    for (int j = 0; j < 12; ++j) num += dprobs[j] * (double(pp[j]) - pm[j]) / 2e-3;
    EXPECT_NEAR(dlogits[i], num, 2e-3) << i;
  }
}

// The CUDA top-k kernel's shared memory: within 48 KiB as is, beyond it by opting in up to the
// device's limit (the kernel's static scratch counted), and a clear error past that.
TEST(SoftmaxTopk, SharedMemoryPlanCountsStaticScratchAndOptsIn) {
  const std::size_t optin = 227 * 1024;  // an H100's opt-in limit per block
  GateSharedMemory m = softmax_topk_shared_memory(4096, 256, optin);
  EXPECT_EQ(m.dynamic_bytes, 16384u);
  EXPECT_FALSE(m.opt_in);
  EXPECT_FALSE(m.error);
  // 12288 experts fill exactly 48 KiB of dynamic memory: with 256 bytes of static scratch that is over.
  m = softmax_topk_shared_memory(12288, 256, optin);
  EXPECT_TRUE(m.opt_in);
  EXPECT_FALSE(m.error);
  m = softmax_topk_shared_memory(12224, 256, optin);
  EXPECT_FALSE(m.opt_in);
  m = softmax_topk_shared_memory(60000, 256, optin);
  ASSERT_TRUE(m.error);
  EXPECT_NE(m.error->find("at most 58048 experts per prototype"), std::string::npos) << *m.error;
  EXPECT_NE(m.error->find("--prototypes"), std::string::npos) << *m.error;
}

TEST(Capacity, HandWorkedPositionsAndDrops) {
  // 6 tokens, 3 experts, top-1, capacity factor 1: C = ceil(1 * 6 / 3 * 1.0) = 2.
  EXPECT_EQ(expert_capacity(1, 6, 3, 1.0), 2);
  EXPECT_EQ(expert_capacity(2, 8, 4, 1.25), 5);  // ceil(2 * 8 / 4 * 1.25) = ceil(5.0)
  EXPECT_EQ(expert_capacity(1, 10, 4, 1.25), 4);  // ceil(3.125)
  CapacityShape c{GateShape{6, 3, 1, 1}, 1, 2};
  const std::int32_t expert[6] = {0, 1, 0, 0, 2, 0};
  std::int32_t pos[6], routed[3], kept[3];
  assign_positions_cpu(c, expert, pos, routed, kept);
  const std::int32_t want[6] = {0, 0, 1, -1, 0, -1};  // tokens 3 and 5 overflow expert 0
  for (int i = 0; i < 6; ++i) EXPECT_EQ(pos[i], want[i]) << i;
  EXPECT_EQ(routed[0], 4);
  EXPECT_EQ(kept[0], 2);
  EXPECT_EQ(kept[1], 1);
  EXPECT_EQ(kept[2], 1);
}

TEST(Capacity, FirstChoicesOfAllTokensComeBeforeSecondChoices) {
  // 3 tokens, top-2 over 3 experts, capacity 2; slots are (token, choice).
  CapacityShape c{GateShape{3, 3, 1, 2}, 1, 2};
  const std::int32_t expert[6] = {0, 1,   // token 0: first 0, second 1
                                  1, 0,   // token 1: first 1, second 0
                                  0, 1};  // token 2: first 0, second 1
  std::int32_t pos[6], routed[3], kept[3];
  assign_positions_cpu(c, expert, pos, routed, kept);
  // expert 0: first choices t0 (0), t2 (1); second choice t1 -> 2: dropped.
  // expert 1: first choice t1 (0); second choices t0 (1), t2 -> 2: dropped.
  const std::int32_t want[6] = {0, 1, 0, -1, 1, -1};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(pos[i], want[i]) << i;
  EXPECT_EQ(routed[0], 3);
  EXPECT_EQ(kept[0], 2);
}

TEST(Capacity, GroupsHaveTheirOwnCapacity) {
  CapacityShape c{GateShape{4, 2, 1, 1}, 2, 1};
  const std::int32_t expert[4] = {0, 0, 0, 1};
  std::int32_t pos[4], routed[4], kept[4];
  assign_positions_cpu(c, expert, pos, routed, kept);
  const std::int32_t want[4] = {0, -1, 0, 0};  // group 1 restarts the count
  for (int i = 0; i < 4; ++i) EXPECT_EQ(pos[i], want[i]) << i;
  EXPECT_EQ(kept[0], 1);  // group 0, expert 0
  EXPECT_EQ(kept[2], 1);  // group 1, expert 0
  EXPECT_EQ(routed[3], 1);
}

// The GPU's counting sort spreads a layer's assignments over ~128 tiles (a GPU's SMs), not a few
// tiles of 1024: 8192 top-1 tokens make 128 tiles of 64, and the workspace holds them all.
TEST(Capacity, TilesAreSizedToSpreadOverTheGpu) {
  EXPECT_EQ(capacity_tile(8192), 64);
  EXPECT_EQ(capacity_tile(32768), 256);
  EXPECT_EQ(capacity_tile(4097 * 16), 544);  // ceil(65552 / 128) = 513, up to the warp
  EXPECT_EQ(capacity_tile(1), kCapacityMinTile);
  EXPECT_EQ(capacity_tile(200003), kCapacityMaxTile);
  for (long n : {1L, 100L, 8192L, 65552L, 1L << 20}) EXPECT_EQ(capacity_tile(n) % 32, 0) << n;
  const CapacityShape c{GateShape{8192, 64, 1, 1}, 1, -1};
  EXPECT_EQ(assign_positions_workspace_bytes(Exec{Backend::cuda}, c), std::size_t(128) * 64 * 4);
  EXPECT_EQ(assign_positions_workspace_bytes(Exec{Backend::cpu}, c), 0u);
}

TEST(LoadStats, CoefficientOfVariationAndDropsOnFixedRouting) {
  // routed [4, 1, 1], kept [2, 1, 1]: cv of kept = sqrt(var) / mean with mean 4/3.
  const auto s = load_stats({4, 1, 1}, {2, 1, 1}, 3);
  EXPECT_NEAR(s.cv, std::sqrt(6.0 / 27.0) / (4.0 / 3.0), 1e-12);
  EXPECT_NEAR(s.dropped_fraction, 2.0 / 6.0, 1e-12);
  EXPECT_EQ(coefficient_of_variation({5, 5, 5}), 0.0);
}

TEST(AuxLoss, MatchesHandComputedDensityAndProxy) {
  // 2 tokens, 2 experts, top-1: probs rows (0.75, 0.25) and (0.4, 0.6); first choices 0 and 1.
  GateShape g{2, 2, 1, 1};
  const float probs[4] = {0.75f, 0.25f, 0.4f, 0.6f};
  const std::int32_t expert[2] = {0, 1};
  float density[2], proxy[2];
  aux_loss_stats_cpu(g, 1, probs, expert, density, proxy);
  EXPECT_FLOAT_EQ(density[0], 0.5f);
  EXPECT_FLOAT_EQ(density[1], 0.5f);
  EXPECT_FLOAT_EQ(proxy[0], 0.575f);
  EXPECT_FLOAT_EQ(proxy[1], 0.425f);
  // aux = coef * E * sum(density * proxy) = 1 * 2 * (0.5 * 0.575 + 0.5 * 0.425) = 1
  float bias[2] = {1.f, -1.f}, x[4] = {0, 0, 0, 0};
  add_group_bias_cpu(2, 2, 1, bias, x);
  EXPECT_EQ(x[2], 1.f);
  EXPECT_EQ(x[3], -1.f);
}

TEST(Permute, DispatchCombineAndTheirBackward) {
  // 3 tokens, 2 slots, hidden 2; token 1's second slot is dropped.
  const std::int32_t row_of[6] = {2, 0, 1, -1, 3, 4};
  RowMap m{3, 2, 2, row_of};
  const float x[6] = {1, 2, 3, 4, 5, 6};
  float rows[10] = {};
  dispatch_rows_cpu(m, x, rows);
  const float want_rows[10] = {1, 2, 3, 4, 1, 2, 5, 6, 5, 6};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(rows[i], want_rows[i]) << i;
  const float weight[6] = {0.5f, 0.25f, 2.f, 9.f, 1.f, -1.f};
  float y[6];
  combine_rows_cpu(m, rows, weight, y);
  EXPECT_FLOAT_EQ(y[0], 0.75f * 1);
  EXPECT_FLOAT_EQ(y[2], 2.f * 3);  // the dropped slot contributes nothing
  EXPECT_FLOAT_EQ(y[4], 0.f);
  const float dy[6] = {1, -1, 2, 0.5f, 3, 1};
  float drows[10] = {}, dweight[6];
  combine_rows_backward_cpu(m, dy, rows, weight, drows, dweight);
  EXPECT_FLOAT_EQ(dweight[0], 1 * 1 - 1 * 2);
  EXPECT_FLOAT_EQ(dweight[3], 0.f);
  EXPECT_FLOAT_EQ(drows[4], 0.5f * 1);  // row 2 <- token 0 slot 0
  float dx[6];
  dispatch_rows_backward_cpu(m, rows, dx, false);
  EXPECT_FLOAT_EQ(dx[0], 2.f * 1);  // token 0 reached two rows
  EXPECT_FLOAT_EQ(dx[2], 3.f);
  EXPECT_FLOAT_EQ(dx[4], 10.f);
}

// Two expert slices of the same slots, each mapping what the other does not: accumulating
// combines and slice backwards together equal the whole map's.
TEST(Permute, SlicesOfTheSlotsAddUpToTheWholeMap) {
  const std::int32_t whole[6] = {2, 0, 1, -1, 3, 4}, first[6] = {2, -1, 1, -1, -1, 4}, second[6] = {-1, 0, -1, -1, 3, -1};
  const float rows[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const float weight[6] = {0.5f, 0.25f, 2.f, 9.f, 1.f, -1.f};
  float want[6], got[6] = {};
  combine_rows_cpu(RowMap{3, 2, 2, whole}, rows, weight, want);
  combine_rows_cpu(RowMap{3, 2, 2, first}, rows, weight, got, true);
  combine_rows_cpu(RowMap{3, 2, 2, second}, rows, weight, got, true);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  const float dy[6] = {1, -1, 2, 0.5f, 3, 1};
  float drows_want[10] = {}, drows_got[10] = {}, dw_want[6], dw_got[6] = {0, 0, 0, 0, 0, 0};
  combine_rows_backward_cpu(RowMap{3, 2, 2, whole}, dy, rows, weight, drows_want, dw_want);
  combine_rows_backward_cpu(RowMap{3, 2, 2, first}, dy, rows, weight, drows_got, dw_got, true);
  combine_rows_backward_cpu(RowMap{3, 2, 2, second}, dy, rows, weight, drows_got, dw_got, true);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(dw_got[i], dw_want[i]) << i;
  for (int i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(drows_got[i], drows_want[i]) << i;
  // Without the flags, the second slice overwrites what the first wrote.
  float over[6] = {};
  combine_rows_cpu(RowMap{3, 2, 2, first}, rows, weight, over);
  combine_rows_cpu(RowMap{3, 2, 2, second}, rows, weight, over);
  EXPECT_NE(over[0], want[0]);
}

TEST(RowMap, BasesPositionsAndForeignExperts) {
  const std::int32_t expert[4] = {0, 1, 1, 0}, position[4] = {0, 0, 1, -1}, base[2] = {-1, 5};
  RowMapSource src{4, 1, 2, 1, expert, position, base};
  std::int32_t row_of[4];
  build_row_map_cpu(src, row_of);
  EXPECT_EQ(row_of[0], -1);  // expert 0 lives elsewhere
  EXPECT_EQ(row_of[1], 5);
  EXPECT_EQ(row_of[2], 6);
  EXPECT_EQ(row_of[3], -1);
}

}  // namespace moebench
