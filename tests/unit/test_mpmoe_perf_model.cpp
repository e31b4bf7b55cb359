// MPMoE's performance model against timelines worked out by hand, and the piecewise-linear
// speed fit against known functions.
#include <gtest/gtest.h>
#include "models/mpmoe_perf_model.h"
#include "models/piecewise_linear.h"
#include "kernels/exec.h"
#include <algorithm>

namespace moebench {

// Paradigm 1 (no M), n = 3, S = 2, C = 5, R = 3 ms, alpha(comm, comp) = 0.8, alpha(comp, comm) = 0.9.
// Streams run at alpha's speed while the other is busy, at full speed alone:
//   P0: S3 alone                                                  2
//   P1: S2 | C1: S done at 2 / 0.8 = 2.5 (C did 2.25), C's last 2.75 alone    5.25
//   P2: R1 + S3 | C2: C done at 5 / 0.9 = 5.556 (comm did 4.444: R in 3.75, S 1.444),
//       S's last 0.556 alone                                      6.111
//   P3: R2 | C3: R done at 3.75 (C did 3.375), C's last 1.625 alone           5.375
//   P4: R3 alone                                                  3
TEST(MPMoEPerfModel, ParadigmOneForwardByHand) {
  Slowdowns a;
  a.alpha[{"comm", "comp"}] = 0.8;
  a.alpha[{"comp", "comm"}] = 0.9;
  PartTimes t;
  t.s = 2;
  t.c = 5;
  t.r = 3;
  const PassPrediction p = predict_forward(3, t, a);
  ASSERT_EQ(p.slots.size(), 5u);
  const double c2 = 5 / 0.9, s_left = 5 - 0.8 * c2;
  EXPECT_NEAR(p.slots[1].ms, 5.25, 1e-9);
  EXPECT_NEAR(p.slots[2].ms, c2 + s_left, 1e-9);
  EXPECT_NEAR(p.slots[3].ms, 5.375, 1e-9);
  EXPECT_NEAR(p.ms, 2 + 5.25 + c2 + s_left + 5.375 + 3, 1e-9);
  EXPECT_NEAR(p.phase_ms.at("P2"), c2 + s_left, 1e-9);
  EXPECT_EQ(p.slots[1].phase, "P1");
  EXPECT_EQ(p.slots[3].phase, "P3");
  // Busy time per operation.
  EXPECT_NEAR(p.busy_ms.at("S"), 2 + 2.5 + (c2 - 3.75) + s_left, 1e-9);
  EXPECT_NEAR(p.busy_ms.at("C"), 5.25 + c2 + 5.375, 1e-9);
  EXPECT_NEAR(p.busy_ms.at("R"), 3.75 + 3.75 + 3, 1e-9);
  EXPECT_EQ(p.busy_ms.at("M"), 0);
  // n = 1: no overlap at all.
  EXPECT_NEAR(predict_forward(1, t, a).ms, 2 + 5 + 3, 1e-9);
  // Streams that end together give the paper's formula: max(work / alpha).
  PartTimes even = t;
  even.s = even.r = 0.8 * 5 / 0.9 / 2;  // R + S take as long as C, both slowed
  EXPECT_NEAR(predict_forward(3, even, a).slots[2].ms, std::max((even.s + even.r) / 0.8, 5 / 0.9), 1e-9);
}

// Paradigm 2 (forward of S1: M of T_DI after S, of T_M after C), n = 2, S = R = 2, C = 4,
// M(T_DI) = 1, M(T_M) = 3; alpha(comp, all) = 0.5, alpha(mem, all) = 0.25, every other 1:
//   slot 0: S1                                                          2
//   slot 1: S2 | C1 | M(DI1): all three until S ends at 2 (C did 1, M 0.5); then C and M at
//           full speed: M ends at 2.5, C at 5                            5
//   slot 2: R1 | C2 | M(DI2) M(M1): all three until R ends at 2 (C did 1, M 0.5); M(DI2) ends
//           at 2.5, C at 5, M(M1) at 5.5                                 5.5
//   slot 3: R2 | M(M2)                                                  3
TEST(MPMoEPerfModel, ParadigmTwoForwardWithOffloadsByHand) {
  Slowdowns a;
  a.alpha[{"comp", "all"}] = 0.5;
  a.alpha[{"mem", "all"}] = 0.25;
  PartTimes t;
  t.s = t.r = 2;
  t.c = 4;
  t.m_rows = 1;
  t.m_middle = 3;
  const PassPrediction p = predict_forward(2, t, a);
  EXPECT_NEAR(p.slots[1].ms, 5, 1e-9);
  EXPECT_NEAR(p.slots[2].ms, 5.5, 1e-9);
  EXPECT_NEAR(p.ms, 2 + 5 + 5.5 + 3, 1e-9);
  EXPECT_NEAR(p.busy_ms.at("M"), 2.5 + 5.5 + 3, 1e-9);
  EXPECT_NEAR(p.busy_ms.at("C"), 10, 1e-9);
  EXPECT_EQ(paradigm("S1", false), 2);
  EXPECT_EQ(paradigm("S4", false), 1);
  EXPECT_EQ(paradigm("none", true), 1);
}

// Paradigm 3 (backward of S3: prefetch T_DI, recompute T_M), n = 2, R' = 1, S' = 2, C' = 6,
// recompute 1, prefetch 2, no slowdowns:
//   slot 0: R'1 | M'1              max(1, 2)        = 2
//   slot 1: C'1 + re | R'2 | M'2   max(7, 1, 2)     = 7
//   slot 2: C'2 + re | S'1         max(7, 2)        = 7
//   slot 3: S'2                    2
TEST(MPMoEPerfModel, ParadigmThreeBackwardByHand) {
  PartTimes t;
  t.r_bwd = 1;
  t.s_bwd = 2;
  t.c_bwd = 6;
  t.re_c = 1;
  t.m_rows_bwd = 2;
  const PassPrediction p = predict_backward(2, t, Slowdowns{});
  EXPECT_NEAR(p.ms, 2 + 7 + 7 + 2, 1e-9);
  EXPECT_NEAR(p.busy_ms.at("C"), 14, 1e-9);
  EXPECT_EQ(paradigm("S3", true), 3);
}

TEST(PiecewiseLinear, RecoversAKneeAndExtrapolatesLinearly) {
  // Latency-bound below 100, bandwidth-bound above: t = 5 + 0.01 v, then slope 0.1 past 100.
  auto f = [](double v) { return v < 100 ? 5 + 0.01 * v : 6 + 0.1 * (v - 100); };
  std::vector<double> v = {10, 30, 60, 100, 200, 400, 800}, t;
  for (double x : v) t.push_back(f(x));
  const PiecewiseLinear fit = PiecewiseLinear::fit(v, t, {100});
  for (double x : {20.0, 100.0, 300.0, 1600.0}) EXPECT_NEAR(fit(x), f(x), 1e-9) << x;
  EXPECT_LT(fit.max_relative_residual(), 1e-12);
  EXPECT_EQ(PiecewiseLinear::every_other(v), (std::vector<double>{60, 200}));
  EXPECT_THROW(PiecewiseLinear::fit({1, 1}, {2, 3}, {}), Error);
  EXPECT_THROW(PiecewiseLinear::fit({1, 2, 3}, {1, 2, 3}, {1.5, 2.5}), Error);
}

}  // namespace moebench
