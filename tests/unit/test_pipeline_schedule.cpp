// Pipeline schedule tables against hand-written ones, and the simulator's bubbles against the
// closed forms: (P - 1) / (M + P - 1) for GPipe and 1F1B, a third of 1F1B's idle time for ZB-H1.
#include <gtest/gtest.h>
#include <stdexcept>
#include "models/pipeline_schedule.h"
#include "models/pipeline_simulator.h"

namespace moebench {
namespace {

std::vector<std::string> table(const PipelineSchedule& s) {
  std::vector<std::string> out;
  for (int st = 0; st < s.stages; ++st) out.push_back(s.describe(st));
  return out;
}

TEST(PipelineSchedule, GPipeIsEveryForwardThenEveryBackward) {
  const auto s = make_pipeline_schedule(PipelineScheduleKind::gpipe, 4, 8);
  const std::string row = "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7";
  EXPECT_EQ(table(s), (std::vector<std::string>{row, row, row, row}));
  EXPECT_EQ(s.peak_in_flight(0), 8);
}

TEST(PipelineSchedule, OneFOneBAtFourStagesEightMicroBatches) {
  const auto s = make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, 4, 8);
  EXPECT_EQ(table(s), (std::vector<std::string>{
                          "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
                          "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
                          "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
                          "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7",
                      }));
  for (int st = 0; st < 4; ++st) EXPECT_EQ(s.peak_in_flight(st), 4 - st) << "stage " << st;
}

TEST(PipelineSchedule, ZeroBubbleH1AtFourStagesEightMicroBatches) {
  const auto s = make_pipeline_schedule(PipelineScheduleKind::zb_h1, 4, 8);
  EXPECT_EQ(table(s), (std::vector<std::string>{
                          "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7",
                          "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7",
                          "F0 F1 B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 F6 B5 W3 F7 B6 W4 B7 W5 W6 W7",
                          "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7",
                      }));
  // Every stage holds 1F1B's peak (its first stage's), no more.
  for (int st = 0; st < 4; ++st) EXPECT_EQ(s.peak_in_flight(st), 4) << "stage " << st;
}

TEST(PipelineSchedule, FewerMicroBatchesThanStagesAndOneStage) {
  const auto s = make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, 4, 2);
  EXPECT_EQ(s.describe(0), "F0 F1 B0 B1");
  EXPECT_EQ(s.describe(3), "F0 B0 F1 B1");
  const auto one = make_pipeline_schedule(PipelineScheduleKind::zb_h1, 1, 3);
  EXPECT_EQ(one.describe(0), "F0 B0 W0 F1 B1 W1 F2 B2 W2");
}

TEST(PipelineSchedule, BadShapesNameTheOption) {
  EXPECT_EQ(validate_pipeline_shape(0, 4).value(), "--pp: 0 pipeline stages; allowed: >= 1");
  EXPECT_EQ(validate_pipeline_shape(2, 0).value(), "--micro-batches: 0; allowed: >= 1");
  EXPECT_FALSE(validate_pipeline_shape(4, 1));
  EXPECT_THROW(make_pipeline_schedule(PipelineScheduleKind::gpipe, 2, 0), std::invalid_argument);
  EXPECT_EQ(parse_schedule("zb-h1"), PipelineScheduleKind::zb_h1);
  EXPECT_FALSE(parse_schedule("interleaved"));
}

// The schedules' table: each row's name round-trips, and whether a schedule splits the backward
// is read from its steps (a W among them), not from which schedule it is.
TEST(PipelineSchedule, EveryRowOfTheTableNamesItselfAndItsStepsSayWhetherItSplits) {
  EXPECT_EQ(schedule_names(), (std::vector<std::string>{"gpipe", "1f1b", "zb-h1"}));
  for (const ScheduleRow& row : schedule_table()) {
    EXPECT_EQ(schedule_name(row.kind), row.name);
    ASSERT_TRUE(parse_schedule(row.name).has_value()) << row.name;
    EXPECT_EQ(*parse_schedule(row.name), row.kind);
    const PipelineSchedule t = make_pipeline_schedule(row.kind, 4, 8);
    bool has_w = false;
    for (const auto& stage : t.steps)
      for (const PipeStep& step : stage) has_w = has_w || step.op == PipeOp::W;
    EXPECT_EQ(t.splits_backward(), has_w) << row.name;
  }
  EXPECT_TRUE(make_pipeline_schedule(PipelineScheduleKind::zb_h1, 2, 2).splits_backward());
  EXPECT_FALSE(make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, 2, 2).splits_backward());
  EXPECT_FALSE(parse_schedule("zb-v").has_value());
}

TEST(PipelineSimulator, GPipeAndOneFOneBBubbleIsTheClosedForm) {
  for (auto kind : {PipelineScheduleKind::gpipe, PipelineScheduleKind::one_f_one_b})
    for (int P : {1, 2, 3, 4, 8})
      for (int M : {1, 2, 4, 8, 16}) {
        const auto sim = simulate_pipeline(make_pipeline_schedule(kind, P, M), {{1, 1, 1}});
        EXPECT_DOUBLE_EQ(sim.makespan, 3.0 * (M + P - 1)) << schedule_name(kind) << " P=" << P << " M=" << M;
        for (int s = 0; s < P; ++s) EXPECT_NEAR(sim.bubble_fraction(s), ideal_bubble_fraction(P, M), 1e-12);
      }
}

TEST(PipelineSimulator, ZeroBubbleH1IdlesAThirdOfOneFOneB) {
  for (int P : {2, 3, 4, 8})
    for (int M : {P, 2 * P, 4 * P}) {
      const auto zb = simulate_pipeline(make_pipeline_schedule(PipelineScheduleKind::zb_h1, P, M), {{1, 1, 1}});
      const auto ofob = simulate_pipeline(make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, P, M), {{1, 1, 1}});
      EXPECT_DOUBLE_EQ(zb.makespan, 3.0 * M + (P - 1)) << "P=" << P << " M=" << M;
      for (int s = 0; s < P; ++s) EXPECT_DOUBLE_EQ(zb.idle(s) * 3, ofob.idle(s)) << "P=" << P << " M=" << M << " stage " << s;
      EXPECT_NEAR(zb.bubble_fraction(), double(P - 1) / (3.0 * M + P - 1), 1e-12);
    }
}

TEST(PipelineSimulator, OpsWaitForTheirInputsAndSendsAddToTheChain) {
  // Two stages, one micro-batch: F on 0, send, F on 1, B on 1, send, B on 0.
  const auto sim = simulate_pipeline(make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, 2, 1),
                                     {{1, 2, 0.5}, {3, 4, 1}}, 0.25);
  ASSERT_EQ(sim.ops[1].size(), 2u);
  EXPECT_DOUBLE_EQ(sim.ops[1][0].start, 1.25);           // after stage 0's F and the send
  EXPECT_DOUBLE_EQ(sim.ops[1][1].end, 1.25 + 3 + 5);     // its B is b + w where the backward is whole
  EXPECT_DOUBLE_EQ(sim.ops[0][1].start, 9.25 + 0.25);    // stage 0's B after stage 1's and the send
  EXPECT_DOUBLE_EQ(sim.makespan, 9.5 + 2.5);
  EXPECT_DOUBLE_EQ(sim.busy[0], 1 + 2.5);
  // Recomputation adds a forward to every backward.
  const auto re = simulate_pipeline(make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, 2, 1),
                                    {{1, 2, 0.5}, {3, 4, 1}}, 0.25, true);
  EXPECT_DOUBLE_EQ(re.makespan, sim.makespan + 3 + 1);
}

TEST(PipelineSimulator, UnequalStagesFollowTheSlowest) {
  // The slowest stage's work plus the fill and drain of the others bounds the makespan below.
  const auto sim = simulate_pipeline(make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, 3, 6),
                                     {{1, 1, 1}, {2, 2, 2}, {1, 1, 1}});
  EXPECT_DOUBLE_EQ(sim.busy[1], 6 * 6.0);
  EXPECT_GE(sim.makespan, 36 + 1 + 2);
  EXPECT_LT(sim.bubble_fraction(1), sim.bubble_fraction(0));
}

TEST(PipelineSimulator, ReplayWithEveryOpsMeanTimeIsTheSimulation) {
  const StageOpTimes t0{1, 2, 0.5}, t1{3, 1.5, 1};
  for (auto kind : {PipelineScheduleKind::gpipe, PipelineScheduleKind::one_f_one_b, PipelineScheduleKind::zb_h1})
    for (int M : {1, 2, 4, 8}) {
      const auto table = make_pipeline_schedule(kind, 2, M);
      std::vector<std::vector<double>> op_ms(2);
      for (int s = 0; s < 2; ++s) {
        const StageOpTimes& t = s == 0 ? t0 : t1;
        for (const PipeStep& step : table.steps[s])
          op_ms[s].push_back(step.op == PipeOp::F ? t.f : step.op == PipeOp::W ? t.w : table.splits_backward() ? t.b : t.b + t.w);
      }
      const auto sim = simulate_pipeline(table, {t0, t1}, 0.25), replay = replay_pipeline(table, op_ms, 0.25);
      EXPECT_DOUBLE_EQ(replay.makespan, sim.makespan) << schedule_name(kind) << " M=" << M;
      for (int s = 0; s < 2; ++s) EXPECT_DOUBLE_EQ(replay.busy[s], sim.busy[s]);
    }
}

TEST(PipelineSimulator, ReplayCarriesOpToOpVariationThatMeanTimesHide) {
  // 1F1B, P = 2, M = 2, backwards of 1: stage 0 runs F0 F1 B0 B1, stage 1 F0 B0 F1 B1. Forwards
  // of 3 then 1 on stage 0 and 1 then 3 on stage 1 (mean 2 each): stage 1's slow F1 now sits
  // between its B0 and B1 while stage 0 waits for B1: makespan 10 where mean times give 9.
  const auto table = make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, 2, 2);
  const auto replay = replay_pipeline(table, {{3, 1, 1, 1}, {1, 1, 3, 1}});
  EXPECT_DOUBLE_EQ(replay.makespan, 10);
  EXPECT_DOUBLE_EQ(replay.ops[1][2].start, 5);  // stage 1's F1 after its B0
  EXPECT_DOUBLE_EQ(replay.ops[0][3].start, 9);  // stage 0's B1 after stage 1's
  EXPECT_DOUBLE_EQ(simulate_pipeline(table, {{2, 1, 0}}).makespan, 9);
  // One entry per op of the table, per stage.
  EXPECT_THROW(replay_pipeline(table, {{3, 1, 1, 1}}), std::invalid_argument);
  EXPECT_THROW(replay_pipeline(table, {{3, 1, 1, 1}, {1, 1, 3}}), std::invalid_argument);
}

TEST(PipelineSimulator, StagesSharingProcessorsRunNoMoreOpsAtOnce) {
  const std::vector<PipelineScheduleKind> kinds{PipelineScheduleKind::gpipe, PipelineScheduleKind::one_f_one_b,
                                                PipelineScheduleKind::zb_h1};
  // GPipe, P = 2, M = 2, F = B = 1: with a processor each stage 1's F1 overlaps stage 0's
  // wait and the step takes 6; on one processor every op waits its turn: the 8 ops' 8.
  const auto gpipe = make_pipeline_schedule(PipelineScheduleKind::gpipe, 2, 2);
  EXPECT_DOUBLE_EQ(simulate_pipeline(gpipe, {{1, 1, 0}}).makespan, 6);
  EXPECT_DOUBLE_EQ(simulate_pipeline(gpipe, {{1, 1, 0}}, 0, false, 1).makespan, 8);
  for (auto kind : kinds) {
    const auto table = make_pipeline_schedule(kind, 4, 8);
    const std::vector<StageOpTimes> t{{1, 2, 1}, {1.5, 2, 0.5}, {1, 1, 1}, {2, 1, 1}};
    const auto free = simulate_pipeline(table, t);
    // One processor: the ops back to back, nothing else (a table that runs always has one ready).
    const auto one = simulate_pipeline(table, t, 0, false, 1);
    double work = 0;
    for (double b : one.busy) work += b;
    EXPECT_DOUBLE_EQ(one.makespan, work) << schedule_name(kind);
    // As many processors as stages or more: as if each had its own.
    for (int p : {4, 5}) EXPECT_DOUBLE_EQ(simulate_pipeline(table, t, 0, false, p).makespan, free.makespan);
    // Two: never three ops at once, the same busy time, no faster than half the work.
    const auto two = simulate_pipeline(table, t, 0.1, false, 2);
    for (int s = 0; s < 4; ++s) EXPECT_DOUBLE_EQ(two.busy[s], free.busy[s]);
    EXPECT_GE(two.makespan, work / 2);
    EXPECT_GE(two.makespan, free.makespan);
    for (const auto& stage : two.ops)
      for (const SimulatedOp& op : stage) {
        int running = 0;
        for (const auto& other : two.ops)
          for (const SimulatedOp& o : other) running += o.start <= op.start && op.start < o.end;
        EXPECT_LE(running, 2) << schedule_name(kind) << " at " << op.start;
      }
  }
  EXPECT_THROW(simulate_pipeline(gpipe, {{1, 1, 0}}, 0, false, -1), std::invalid_argument);
}

TEST(PipelineSimulator, ATableThatCannotRunIsRefused) {
  auto s = make_pipeline_schedule(PipelineScheduleKind::gpipe, 2, 2);
  std::swap(s.steps[1][0], s.steps[1][2]);  // stage 1 asks for B0 before its F0
  EXPECT_THROW(simulate_pipeline(s, {{1, 1, 1}}), std::invalid_argument);
  EXPECT_THROW(simulate_pipeline(s, {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}}), std::invalid_argument);
}

}  // namespace
}  // namespace moebench
