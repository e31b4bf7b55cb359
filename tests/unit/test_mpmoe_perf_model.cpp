// MPMoE's performance model against timelines worked out by hand, and the piecewise-linear
// speed fit against known functions.
#include <gtest/gtest.h>
#include "models/mpmoe_perf_model.h"
#include "models/piecewise_linear.h"
#include "kernels/exec.h"

namespace moebench {

// Paradigm 1 (no M), n = 3, S = 2, C = 5, R = 3 ms, alpha(comm, comp) = 0.8, alpha(comp, comm) = 0.9:
//   P0: S1                   2
//   P1: C1 | S2              max(2 / 0.8, 5 / 0.9)       = 5.5556
//   P2: C2 | R1 + S3         max(5 / 0.8, 5 / 0.9)       = 6.25
//   P3: C3 | R2              max(3 / 0.8, 5 / 0.9)       = 5.5556
//   P4: R3                   3
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
  const double c = 5 / 0.9;
  EXPECT_NEAR(p.ms, 2 + c + 6.25 + c + 3, 1e-9);
  EXPECT_NEAR(p.phase_ms.at("P2"), 6.25, 1e-9);
  EXPECT_EQ(p.slots[1].phase, "P1");
  EXPECT_EQ(p.slots[3].phase, "P3");
  // Busy time per operation: S runs alone once and beside C twice; C always beside comm.
  EXPECT_NEAR(p.busy_ms.at("S"), 2 + 2 / 0.8 + 2 / 0.8, 1e-9);
  EXPECT_NEAR(p.busy_ms.at("C"), 3 * c, 1e-9);
  EXPECT_NEAR(p.busy_ms.at("R"), 3 / 0.8 + 3 / 0.8 + 3, 1e-9);
  EXPECT_EQ(p.busy_ms.at("M"), 0);
  // n = 1: no overlap at all.
  EXPECT_NEAR(predict_forward(1, t, a).ms, 2 + 5 + 3, 1e-9);
}

// Paradigm 2 (forward of S1: M of T_DI after S, of T_M after C), n = 2, S = R = 2, C = 4,
// M(T_DI) = 1, M(T_M) = 3; alpha(comp, all) = 0.5, alpha(mem, all) = 0.25, others 1:
//   slot 0: S1                                 2
//   slot 1: C1 | S2 | M(DI1)       all three:  max(2, 4 / 0.5, 1 / 0.25)            = 8
//   slot 2: C2 | R1 | M(DI2)+M(M1) all three:  max(2, 4 / 0.5, 4 / 0.25)            = 16
//   slot 3: R2 | M(M2)             comm, mem:  max(2, 3)                             = 3
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
  EXPECT_NEAR(p.ms, 2 + 8 + 16 + 3, 1e-9);
  EXPECT_NEAR(p.busy_ms.at("M"), 1 / 0.25 + 4 / 0.25 + 3, 1e-9);
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
