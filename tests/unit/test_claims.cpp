// The claim ledger's parts: the expressions over a results folder (cells with their runs'
// ranges, selections, aggregates, row expressions, what is missing and why) and the verdicts by
// tolerance class, noise included.
#include <gtest/gtest.h>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include "kernels/exec.h"
#include "tools/claims/expression.h"
#include "tools/claims/ledger.h"
#include "tools/claims/between_runs.h"
#include "tools/claims/stability.h"

namespace moebench {
namespace {

namespace fs = std::filesystem;

class ClaimExpression : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() / ("moebench_claims_" + std::to_string(::getpid()));
    fs::create_directories(root / "t");
    std::ofstream(root / "t/a.csv") << "model,tp,step_ms,step_ms_min,step_ms_max,share,note,device\n"
                                       "Dense,1,10,9,12,50%,a,cpu X\n"
                                       "DPMoE,1,20,18,21,n/a,\"b, c\",cpu X\n"
                                       "DPMoE,2,40,39,44,-,b,cpu X\n";
  }
  void TearDown() override { fs::remove_all(root); }
  Evaluation eval(const std::string& e) {
    ResultFiles files(root.string());
    return evaluate(e, files);
  }
  // That `e` gave a number, `v` with the range [lo, hi].
  static void expect_number(const Evaluation& e, double v, double lo, double hi) {
    ASSERT_TRUE(e.value) << e.missing;
    EXPECT_EQ(e.value->v, v);
    EXPECT_EQ(e.value->lo, lo);
    EXPECT_EQ(e.value->hi, hi);
  }
  fs::path root;
};

TEST_F(ClaimExpression, ACellCarriesItsRunsRange) {
  const Evaluation e = eval("value(t/a.csv[model=Dense].step_ms)");
  expect_number(e, 10, 9, 12);
  EXPECT_EQ(e.files, std::set<std::string>{"t/a.csv"});
}

TEST_F(ClaimExpression, ArithmeticCarriesTheRange) {
  // 20 [18, 21] / 10 [9, 12] = 2 [1.5, 2.333]
  const Evaluation e = eval("value(t/a.csv[model=DPMoE,tp=1].step_ms) / value(t/a.csv[model=Dense].step_ms)");
  ASSERT_TRUE(e.value) << e.missing;
  EXPECT_DOUBLE_EQ(e.value->v, 2);
  EXPECT_DOUBLE_EQ(e.value->lo, 1.5);
  EXPECT_DOUBLE_EQ(e.value->hi, 21.0 / 9);
  const Evaluation d = eval("value(t/a.csv[model=DPMoE,tp=2].step_ms) - 2 * value(t/a.csv[model=Dense].step_ms) + -1");
  ASSERT_TRUE(d.value);
  EXPECT_DOUBLE_EQ(d.value->v, 19);
  EXPECT_DOUBLE_EQ(d.value->lo, 39 - 24 - 1);
  EXPECT_DOUBLE_EQ(d.value->hi, 44 - 18 - 1);
}

// Repetitions run interleaved (c_reps) pair up: B took twice A's time in every round, so B / A is
// 2 with no spread, where the ends of their ranges, combined, would say 1.5 to 2.67.
TEST_F(ClaimExpression, RepetitionsPairUpInArithmeticAndAggregates) {
  std::ofstream(root / "t/r.csv") << "model,k,step_ms,step_ms_min,step_ms_max,step_ms_reps\n"
                                     "A,1,10,9,12,9;10;12;10;11\n"
                                     "B,2,20,18,24,18;20;24;20;22\n"
                                     "C,3,30,27,36,27;30;36;30\n";  // four repetitions: pairs with no other row
  const Evaluation paired = eval("value(t/r.csv[model=B].step_ms) / value(t/r.csv[model=A].step_ms)");
  ASSERT_TRUE(paired.value) << paired.missing;
  EXPECT_DOUBLE_EQ(paired.value->v, 2);
  EXPECT_DOUBLE_EQ(paired.value->lo, 2);
  EXPECT_DOUBLE_EQ(paired.value->hi, 2);
  // A cell alone: its median, and the median's interval (5 samples: min..max, 94% coverage).
  const Evaluation a = eval("value(t/r.csv[model=A].step_ms)");
  EXPECT_EQ(a.value->v, 10);
  EXPECT_EQ(a.value->lo, 9);
  EXPECT_EQ(a.value->hi, 12);
  // A constant applies to every repetition; a sum over rows adds repetition i to repetition i.
  EXPECT_DOUBLE_EQ(eval("2 * value(t/r.csv[model=A].step_ms) - value(t/r.csv[model=B].step_ms)").value->hi, 0);
  const Evaluation sum = eval("sum(t/r.csv[k<3].step_ms) / value(t/r.csv[model=A].step_ms)");
  EXPECT_DOUBLE_EQ(sum.value->lo, 3);
  EXPECT_DOUBLE_EQ(sum.value->hi, 3);
  // Unequal counts do not pair: the ranges' ends combine, as without repetitions.
  const Evaluation unpaired = eval("value(t/r.csv[model=C].step_ms) / value(t/r.csv[model=A].step_ms)");
  EXPECT_DOUBLE_EQ(unpaired.value->lo, 27.0 / 12);
  EXPECT_DOUBLE_EQ(unpaired.value->hi, 36.0 / 9);
}

TEST_F(ClaimExpression, AggregatesFiltersAndRowExpressions) {
  EXPECT_EQ(eval("max(t/a.csv[model=DPMoE].step_ms)").value->v, 40);
  EXPECT_EQ(eval("min(t/a.csv[model~PMo].step_ms)").value->v, 20);
  EXPECT_EQ(eval("mean(t/a.csv[].step_ms)").value->v, 70.0 / 3);
  EXPECT_EQ(eval("median(t/a.csv[tp>=1].step_ms)").value->v, 20);
  EXPECT_EQ(eval("sum(t/a.csv[tp<2].step_ms)").value->v, 30);
  EXPECT_EQ(eval("count(t/a.csv[model!=Dense])").value->v, 2);
  EXPECT_EQ(eval("distinct(t/a.csv[].note)").value->v, 3);  // a, "b, c", b
  EXPECT_EQ(eval("at_max(t/a.csv[].step_ms, tp)").value->v, 40);
  EXPECT_EQ(eval("at_min(t/a.csv[model=DPMoE].step_ms, tp)").value->v, 20);
  EXPECT_DOUBLE_EQ(eval("mean(t/a.csv[model=DPMoE]{step_ms / tp})").value->v, 20);
  EXPECT_EQ(eval("value(t/a.csv[model=Dense].share)").value->v, 50);  // "50%"
  EXPECT_EQ(eval("max(t/a.csv[].share)").value->v, 50);  // n/a and - are skipped
  EXPECT_EQ(eval("abs(0 - 3)").value->v, 3);
}

// span(V, LO, HI): a count whose range the run's spread sets from other columns (which strategies
// could have been fastest), so a count the spread could change gives no direction.
TEST_F(ClaimExpression, SpanGivesANumberTheRangeOfOtherExpressions) {
  expect_number(eval("span(distinct(t/a.csv[tp=1].model), distinct(t/a.csv[tp=2].model), distinct(t/a.csv[].note))"), 2,
                1, 3);
  expect_number(eval("span(5, 6, 4)"), 5, 5, 5);  // the range always holds the number
  EXPECT_THROW(eval("span(1, 2)"), Error);
}

TEST_F(ClaimExpression, WhatIsMissingIsNamedNotMadeUp) {
  EXPECT_NE(eval("value(t/b.csv[].x)").missing.find("t/b.csv is not in the results folder"), std::string::npos);
  EXPECT_NE(eval("value(t/a.csv[model=MoE].step_ms)").missing.find("no row matches [model=MoE]"), std::string::npos);
  EXPECT_NE(eval("value(t/a.csv[model=DPMoE].step_ms)").missing.find("2 rows match"), std::string::npos);
  EXPECT_NE(eval("value(t/a.csv[model=Dense].speed)").missing.find("no column 'speed'"), std::string::npos);
  EXPECT_NE(eval("value(t/a.csv[model=DPMoE,tp=1].share)").missing.find("is no number"), std::string::npos);
  EXPECT_NE(eval("value(t/a.csv[model=Dense].step_ms) / (value(t/a.csv[model=Dense].step_ms) - 10)").missing.find("holds 0"),
            std::string::npos);
  EXPECT_FALSE(eval("value(t/b.csv[].x)").value);
}

TEST_F(ClaimExpression, AMistypedExpressionIsAnError) {
  EXPECT_THROW(eval("value(t/a.csv[model=Dense].step_ms"), Error);
  EXPECT_THROW(eval("value(t/a.csv[model].step_ms)"), Error);
  EXPECT_THROW(eval("frobnicate(t/a.csv[].step_ms)"), Error);
  EXPECT_THROW(eval("1 +"), Error);
  EXPECT_THROW(eval("step_ms"), Error);  // a column outside {...}
}

ClaimSpec spec(const std::string& judge, const std::string& baseline = "") {
  ClaimSpec s;
  s.id = "x";
  s.judge = judge;
  s.baseline = baseline;
  s.unit = "x";
  return s;
}

TEST(ClaimVerdict, EachToleranceClass) {
  EXPECT_EQ(judge_number(spec("match:15"), 2.0, Number::exact(2.2)).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("match:15"), 2.0, Number::exact(2.5)).verdict, "partly");  // within 2P
  EXPECT_EQ(judge_number(spec("match:15"), 2.0, Number::exact(3.0)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("match:15", "1"), 2.0, Number::exact(1.6)).verdict, "partly");  // the paper's side of 1, within 1 + 2P
  EXPECT_EQ(judge_number(spec("match:15", "1"), 2.0, Number::exact(0.9)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("within:5"), 38, Number::exact(34)).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("within:5"), 38, Number::exact(30)).verdict, "partly");
  EXPECT_EQ(judge_number(spec("within:5"), 38, Number::exact(20)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, Number::exact(1.8)).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, Number::exact(1.5)).verdict, "partly");  // half the effect past 1 or more
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, Number::exact(0.8)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("at_most", "1"), 0.7, Number::exact(0.6)).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("above:1"), 9.8, Number::exact(1.2)).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("above:1"), 9.8, Number::exact(0.9)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("below:1"), 0.5, Number::exact(0.9)).verdict, "reproduced");
  EXPECT_THROW(judge_number(spec("roughly"), 1, Number::exact(1)), Error);
  EXPECT_THROW(judge_number(spec("match:"), 1, Number::exact(1)), Error);
}

// Partly is bounded: 4x the paper's ratio, on its side of 1, is not partly (M6-T's 4 top-4 was).
TEST(ClaimVerdict, PartlyIsBoundedByTwiceTheTolerance) {
  const Judgement far = judge_number(spec("match:20", "1"), 2.07, Number::exact(8.25));
  EXPECT_EQ(far.verdict, "not reproduced");
  EXPECT_NE(far.why.find("the same direction, but 3.99x off"), std::string::npos) << far.why;
  EXPECT_EQ(judge_number(spec("match:20", "1"), 2.07, Number::exact(2.8)).verdict, "partly");  // 35% off
  // Within P of the paper's ratio but on the other side of the no-effect value: no effect shown.
  EXPECT_EQ(judge_number(spec("match:15", "1"), 1.05, Number::exact(0.98)).verdict, "not reproduced");
}

// A share (unit %) within D points but a sixth of the paper's is not reproduced (PPMoE's gating:
// 0.34% against 2.1%); within D and a factor of 2 it is.
TEST(ClaimVerdict, AShareIsHeldToAFactorOfTwoAsWellAsItsPoints) {
  ClaimSpec share = spec("within:5");
  share.unit = "%";
  const Judgement sixth = judge_number(share, 2.1, Number::exact(0.34));
  EXPECT_EQ(sixth.verdict, "not reproduced");
  EXPECT_NE(sixth.why.find("more than a factor of 2"), std::string::npos) << sixth.why;
  EXPECT_EQ(judge_number(share, 2.1, Number::exact(0.0)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(share, 2.1, Number::exact(1.5)).verdict, "reproduced");
  EXPECT_EQ(judge_number(share, 38, Number::exact(30)).verdict, "partly");
  // Points that are not a share (a difference of two shares, unit points) keep the points alone.
  ClaimSpec points = spec("within:5");
  points.unit = "points";
  EXPECT_EQ(judge_number(points, 2.1, Number::exact(0.34)).verdict, "reproduced");
}

TEST(ClaimVerdict, NoiseWhenTheRangeHoldsTheNoEffectValue) {
  // A range through 1 gives no direction, however wide the effect claimed.
  EXPECT_EQ(judge_number(spec("match:15", "1"), 1.25, {1.1, 0.9, 1.3}).verdict, "noise");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, {1.1, 0.9, 1.4}).verdict, "noise");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, {0.9, 0.7, 1.4}).verdict, "noise");
  EXPECT_EQ(judge_number(spec("above:1"), 9.8, {1.1, 0.9, 1.3}).verdict, "noise");
  EXPECT_EQ(judge_number(spec("below:1"), 0.5, {0.9, 0.8, 1.0}).verdict, "noise");  // an end at 1 holds it
  // A range on one side is judged by its median.
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, {1.45, 1.4, 1.5}).verdict, "partly");
  EXPECT_EQ(judge_number(spec("above:1"), 1.29, {1.1, 1.06, 1.23}).verdict, "reproduced");
  // No range (a count, a model's number): never noise.
  EXPECT_EQ(judge_number(spec("match:15", "1"), 1.25, Number::exact(1.0)).verdict, "not reproduced");
}

// A verdict holds only over the run's range widened by its class's between-run spread; else it is
// unsettled, naming the verdicts it lies between. No fixed margin: the spread is measured.
TEST(ClaimVerdict, AVerdictHoldsOnlyOverTheRangeWidenedByTheBetweenRunSpread) {
  // 1.03 [1.02, 1.04] against 1.2: reproduced over its own range; widened by 5% it reaches 0.969,
  // the other side of 1.
  EXPECT_EQ(judge_number(spec("match:20", "1"), 1.2, {1.03, 1.02, 1.04}).verdict, "reproduced");
  const Judgement widened = judge_number(spec("match:20", "1"), 1.2, {1.03, 1.02, 1.04}, 0.05);
  EXPECT_EQ(widened.verdict, kUnsettled);
  EXPECT_EQ(widened.reaches, (std::vector<std::string>{"reproduced", "not reproduced"}));
  EXPECT_EQ(widened.why.rfind("between reproduced and not reproduced: ", 0), 0u) << widened.why;
  EXPECT_NE(widened.why.find("widened by its class's between-run spread (5%) to [0.969, 1.09]"), std::string::npos)
      << widened.why;
  EXPECT_EQ(judge_number(spec("above:1"), 1.0, {1.03, 1.01, 1.04}, 0.05).verdict, kUnsettled);
  // Past the widened range the direction holds, on either side.
  EXPECT_EQ(judge_number(spec("above:1"), 1.0, {1.10, 1.051, 1.2}, 0.04).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("match:20", "1"), 1.2, {0.90, 0.85, 0.94}, 0.05).verdict, "not reproduced");
  // Every class is widened, a residual in % too.
  ClaimSpec residual = spec("below:10");
  residual.unit = "%";
  EXPECT_EQ(judge_number(residual, 0, {9.8, 9.7, 9.9}).verdict, "reproduced");
  EXPECT_EQ(judge_number(residual, 0, {9.8, 9.7, 9.9}, 0.05).verdict, kUnsettled);
  // A number with no range (a count, the model's) and no spread is what it is; noise stays noise.
  EXPECT_EQ(judge_number(spec("match:20", "1"), 1.2, Number::exact(1.03)).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("match:20", "1"), 1.2, {1.03, 0.98, 1.1}, 0.05).verdict, "noise");
}

// Magnitude before noise: a range whose every point is past the partly bound, or on the wrong side
// of the threshold, is not reproduced though it holds 1 (MPMoE's 2.32x "up to", measured [0.977, 1.051]).
TEST(ClaimVerdict, ARangeFarFromThePapersValueIsNotReproducedThoughItHoldsTheNoEffectValue) {
  const double m = 0.05;  // a between-run spread
  const Judgement far = judge_number(spec("match:20", "1"), 2.32, {1.0, 0.977, 1.051}, m);
  EXPECT_EQ(far.verdict, "not reproduced");
  EXPECT_NE(far.why.find("even the range's point nearest the paper's, 1.05,"), std::string::npos) << far.why;
  EXPECT_EQ(judge_number(spec("match:20", "1"), 1.66, {0.93, 0.90, 0.96}, m).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, {1.0, 0.95, 1.2}, m).verdict, "not reproduced");  // below 1.375
  EXPECT_EQ(judge_number(spec("at_most", "1"), 0.5, {1.0, 0.8, 1.1}, m).verdict, "not reproduced");    // above 0.75
  EXPECT_EQ(judge_number(spec("above:1"), 1.0, {0.96, 0.92, 0.99}).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("below:1"), 0.5, {1.03, 1.02, 1.04}).verdict, "not reproduced");
  // ... until the spread carries an end across the threshold.
  EXPECT_EQ(judge_number(spec("above:1"), 1.0, {0.96, 0.92, 0.99}, m).verdict, kUnsettled);
  // A range that reaches the band is judged as before: noise where it holds 1.
  EXPECT_EQ(judge_number(spec("match:20", "1"), 1.25, {1.0, 0.9, 1.3}, m).verdict, "noise");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, {1.0, 0.9, 1.4}, m).verdict, "noise");
}

// Partly is symmetric in ratio: a factor of 1 + 2P either way (match:50 no longer reaches 0), and
// at_least / at_most need half the paper's effect past the baseline (1.01 is not partly of 1.75).
TEST(ClaimVerdict, PartlyIsAFactorEitherWayAndHalfTheEffectForBounds) {
  EXPECT_EQ(judge_number(spec("match:50"), 1.0, Number::exact(0.259)).verdict, "not reproduced");  // 3.9x off
  EXPECT_EQ(judge_number(spec("match:50"), 1.0, Number::exact(0.55)).verdict, "partly");           // 1.8x
  EXPECT_EQ(judge_number(spec("match:50"), 1.0, Number::exact(1.8)).verdict, "partly");
  EXPECT_EQ(judge_number(spec("match:50"), 1.0, Number::exact(0.6)).verdict, "partly");            // 1.67x: not within 1.5
  EXPECT_EQ(judge_number(spec("match:50"), 1.0, Number::exact(0.7)).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("match:50"), 1.0, Number::exact(-0.5)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, Number::exact(1.01)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, Number::exact(1.38)).verdict, "partly");
  EXPECT_EQ(judge_number(spec("at_most", "1"), 0.5, Number::exact(0.8)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("at_most", "1"), 0.5, Number::exact(0.7)).verdict, "partly");
}

TEST(ClaimVerdict, AnUnsettledVerdictNamesTheVerdictsItLiesBetween) {
  // At least 1.75 over 1: the median 1.5 is partly; the range's high end, 1.9, is past the bound.
  const Judgement below = judge_number(spec("at_least", "1"), 1.75, {1.5, 1.4, 1.9});
  EXPECT_EQ(below.verdict, kUnsettled);
  EXPECT_EQ(below.reaches, (std::vector<std::string>{"partly", "reproduced"}));
  EXPECT_EQ(below.why.rfind("between partly and reproduced: ", 0), 0u) << below.why;
  EXPECT_NE(below.why.find("; the run's range reaches reproduced"), std::string::npos) << below.why;
  // Within 15% of 2: both ends are off by 20%, one verdict named once.
  const Judgement both = judge_number(spec("match:15"), 2.0, {2.1, 1.6, 2.4});
  EXPECT_EQ(both.verdict, kUnsettled);
  EXPECT_EQ(both.reaches, (std::vector<std::string>{"reproduced", "partly"}));
  // A range inside its verdict, a number with no range, and noise lie between nothing.
  for (const Judgement& j : {judge_number(spec("match:15"), 2.0, {2.1, 2.0, 2.2}),
                             judge_number(spec("match:15"), 2.0, Number::exact(1.6)),
                             judge_number(spec("match:15", "1"), 1.25, {1.1, 0.9, 1.3})}) {
    EXPECT_TRUE(j.reaches.empty()) << j.verdict << ": " << j.why;
    EXPECT_NE(j.verdict, kUnsettled) << j.why;
  }
}

// The spread of each class, from a stability pair's two numbers per claim: claims whose number did
// not move (counts, seeded runs) enter no spread; the 90th percentile is the nearest rank's.
TEST(ClaimVerdict, TheBetweenRunSpreadIsMeasuredPerClassOverTheClaimsThatMove) {
  std::vector<ClaimSpec> specs;
  std::string csv = "claim,first_verdict,second_verdict,same,first_value,second_value,runs\n";
  for (int i = 1; i <= 10; ++i) {  // ratios moving 1% .. 10%
    ClaimSpec c = spec("match:20", "1");
    c.id = "r" + std::to_string(i);
    c.unit = "x";
    c.quantity = "relative";
    specs.push_back(c);
    csv += c.id + ",reproduced,reproduced,yes,1," + std::to_string(1 - i / 100.0) + ",a\n";
  }
  ClaimSpec count = specs[0], share = specs[0], uncounted = specs[0];
  count.id = "count", share.id = "share", share.unit = "%", uncounted.id = "uncounted";
  specs.insert(specs.end(), {count, share, uncounted});
  csv += "count,reproduced,reproduced,yes,2,2,a\nshare,partly,reproduced,no,40,30,a\n"
         "uncounted,modelled only,modelled only,-,3,1,a\n";
  const fs::path path = fs::temp_directory_path() / ("moebench_spread_" + std::to_string(::getpid()) + ".csv");
  std::ofstream(path) << csv;
  const BetweenRuns spreads = between_runs(CsvRows::read(path.string()), specs);
  fs::remove(path);
  const ClassSpread& ratio = spreads.classes.at("timing ratio");
  EXPECT_EQ(ratio.moved, 10);
  EXPECT_EQ(ratio.still, 1);  // the count
  EXPECT_NEAR(ratio.median, 0.055, 1e-12);
  EXPECT_NEAR(ratio.p90, 0.09, 1e-12);
  EXPECT_NEAR(spreads.classes.at("share").p90, 0.25, 1e-12);
  EXPECT_NEAR(between_run_spread(spreads, specs[3]), 0.09, 1e-12);
  EXPECT_EQ(between_run_spread(spreads, count), 0);  // its own number did not move
  ClaimSpec unpaired = specs[0];
  unpaired.id = "added since";
  EXPECT_NEAR(between_run_spread(spreads, unpaired), 0.09, 1e-12);  // its class's
  ClaimSpec residual = share;
  residual.judge = "below:10";
  EXPECT_EQ(claim_class(residual), "fit residual");
  ClaimSpec fraction = specs[0];
  fraction.unit = "";
  EXPECT_EQ(claim_class(fraction), "fraction");
  EXPECT_EQ(between_run_spread(spreads, fraction), 0);  // no claim of its class moved
}

class ClaimLedger : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() / ("moebench_ledger_" + std::to_string(::getpid()));
    fs::create_directories(root / "x");
    fs::create_directories(root / "cuda/x");
    fs::create_directories(root / "models");
    fs::create_directories(root / "repo/kernels");
    first = commit("kernels/gemm.cpp", "1");
  }
  void TearDown() override { fs::remove_all(root); }
  // Commits `text` as `file` of the scratch repository; returns the commit's short id.
  std::string commit(const std::string& file, const std::string& text) {
    fs::create_directories((root / "repo" / file).parent_path());
    std::ofstream(root / "repo" / file) << text << "\n";
    const std::string git = "git -C " + (root / "repo").string() + " ";
    EXPECT_EQ(std::system((git + "init -q 2>/dev/null && " + git + "add -A && " + git +
                           "-c user.name=t -c user.email=t@t commit -q -m c >/dev/null")
                              .c_str()),
              0);
    const std::string id_file = (root / "id").string();
    EXPECT_EQ(std::system((git + "rev-parse --short=7 HEAD > " + id_file).c_str()), 0);
    std::string id;
    std::ifstream(id_file) >> id;
    return id;
  }
  // A CSV of one row: ratio with its range, and where, when and at which commit it ran.
  void write(const std::string& path, double v, double lo, double hi, const std::string& backend, const std::string& link,
             const std::string& at = "", const std::string& date = "2026-12-01T00:00:00Z") {
    std::ofstream(root / path) << "ratio,ratio_min,ratio_max,backend,device,ranks,link,scale,commit,date\n"
                               << v << "," << lo << "," << hi << "," << backend << ",X,4,\"" << link << "\",local,"
                               << (at.empty() ? first : at) << "," << date << "\n";
  }
  // The same CSV on the CPU at 4 ranks, with a `column` saying what processors the ranks had.
  void write_processors(const std::string& column, const std::string& processors) {
    std::ofstream(root / "x/r.csv") << "ratio,ratio_min,ratio_max," << column << ",backend,device,ranks,link,scale,commit,date\n"
                                    << "1.5,1.45,1.55," << processors << ",cpu,X,4,measured: MPI,local," << first
                                    << ",2026-12-01T00:00:00Z\n";
  }
  ClaimResult judged(const std::string& relevant_hardware, const std::string& model = "", const std::string& paper = "1.5",
                     const std::string& local = "value(x/r.csv[].ratio)") {
    ClaimSpec c = spec("match:15", "1");
    c.id = "x.claim";
    c.quantity = "relative";
    c.paper_value = paper;
    c.local = local;
    c.gpu = "=";
    c.model = model;
    c.relevant_hardware = relevant_hardware;
    return judge_claims({c}, root.string(), (root / "repo").string()).at(0);
  }
  fs::path root;
  std::string first;
};

TEST_F(ClaimLedger, AClaimAboutGpuBehaviourJudgedOnTheCpuIsNotOnTheRelevantHardware) {
  write("x/r.csv", 1.5, 1.45, 1.55, "cpu", "measured: MPI between the ranks' hosts");
  const ClaimResult cpu_only = judged("gpu");
  EXPECT_EQ(cpu_only.verdict, kOffHardware);
  EXPECT_NE(cpu_only.why.find("GPU behaviour"), std::string::npos) << cpu_only.why;
  EXPECT_EQ(judged("").verdict, "reproduced");  // the same number, for a claim about any hardware
  write("cuda/x/r.csv", 1.4, 1.38, 1.41, "cuda", "measured: NCCL");
  EXPECT_EQ(judged("gpu").verdict, "reproduced");  // the GPU run judges it
}

TEST_F(ClaimLedger, ComputeSlowingCommunicationIsNotJudgedOnTheSleepingEmulatedLink) {
  write("x/r.csv", 1.5, 1.45, 1.55, "cpu", "emulated: 0.02 GB/s, 10 us");
  const ClaimResult emulated = judged("core_link");
  EXPECT_EQ(emulated.verdict, kOffHardware);
  EXPECT_NE(emulated.why.find("sleeps without using a core"), std::string::npos) << emulated.why;
  write("x/r.csv", 1.5, 1.45, 1.55, "cpu", "measured: MPI between the ranks' hosts");
  EXPECT_EQ(judged("core_link").verdict, "reproduced");
  EXPECT_THROW(judged("tpu"), Error);
}

// A pipeline's bubble measured with more stages than cores is the machine's, not the schedule's.
TEST_F(ClaimLedger, ABubbleMeasuredOnSharedCoresIsNotOnTheRelevantHardware) {
  auto bubble = [&](const std::string& processors) { write_processors("simulator_processors", processors); };
  bubble("2 cores shared by the stages");
  const ClaimResult shared = judged("core_per_stage");
  EXPECT_EQ(shared.verdict, kOffHardware);
  EXPECT_NE(shared.why.find("2 cores shared by the stages"), std::string::npos) << shared.why;
  bubble("one per stage");
  EXPECT_EQ(judged("core_per_stage").verdict, "reproduced");
}

// A step's phase split measured with more ranks than cores is the machine's scheduling: a rank's
// wait for a core lands in whichever phase it was in.
TEST_F(ClaimLedger, APhaseSplitMeasuredOnSharedCoresIsNotOnTheRelevantHardware) {
  auto split = [&](const std::string& processors) { write_processors("processors", processors); };
  split("2 cores shared by the 4 ranks");
  const ClaimResult shared = judged("core_per_rank");
  EXPECT_EQ(shared.verdict, kOffHardware);
  EXPECT_NE(shared.why.find("how a step's time divides among its phases: here 2 cores shared by the 4 ranks"),
            std::string::npos) << shared.why;
  EXPECT_EQ(judged("core_per_stage").verdict, kOffHardware);  // a pipeline's bubble on them too
  const ClaimResult asks_nothing = judged("");
  EXPECT_EQ(asks_nothing.verdict, "reproduced");  // a claim that does not ask
  EXPECT_NE(asks_nothing.why.find("4 ranks (2 cores shared by the 4 ranks)"), std::string::npos)
      << "the judged line says what may cause its number: " << asks_nothing.why;
  write("x/r.csv", 1.5, 1.45, 1.55, "cpu", "emulated: 0.02 GB/s, 10 us");
  EXPECT_NE(judged("").why.find("emulated: 0.02 GB/s, 10 us (a link that sleeps, using no core)"), std::string::npos)
      << judged("").why;
  split("one per rank");
  EXPECT_EQ(judged("core_per_rank").verdict, "reproduced");
}

// Every row's processors count, not the first's; a CSV that does not say is not judged where the
// claim needs a core per rank.
TEST_F(ClaimLedger, EveryRowSaysWhatCoresItsRanksHad) {
  std::ofstream(root / "x/r.csv") << "ratio,ratio_min,ratio_max,processors,backend,device,ranks,link,scale,commit,date\n"
                                  << "1.5,1.45,1.55,one per rank,cpu,X,4,measured: MPI,local," << first << ",2026-12-01T00:00:00Z\n"
                                  << "1.5,1.45,1.55,2 cores shared by the 4 ranks,cpu,X,4,measured: MPI,local," << first
                                  << ",2026-12-01T00:00:00Z\n";
  const ClaimResult second = judged("core_per_rank", "", "1.5", "max(x/r.csv[].ratio)");
  EXPECT_EQ(second.verdict, kOffHardware) << second.why;
  EXPECT_NE(second.why.find("2 cores shared by the 4 ranks"), std::string::npos) << second.why;
  // A row the expression does not read does not count (another layout's, in the same CSV).
  std::ofstream(root / "x/r.csv") << "part,ratio,ratio_min,ratio_max,processors,backend,device,ranks,link,scale,commit,date\n"
                                  << "a,1.5,1.45,1.55,one per rank,cpu,X,2,measured: MPI,local," << first << ",2026-12-01T00:00:00Z\n"
                                  << "b,1.5,1.45,1.55,2 cores shared by the 4 ranks,cpu,X,4,measured: MPI,local," << first
                                  << ",2026-12-01T00:00:00Z\n";
  EXPECT_EQ(judged("core_per_rank", "", "1.5", "value(x/r.csv[part=a].ratio)").verdict, "reproduced");
  EXPECT_EQ(judged("core_per_rank", "", "1.5", "value(x/r.csv[part=b].ratio)").verdict, kOffHardware);
  write("x/r.csv", 1.5, 1.45, 1.55, "cpu", "measured: MPI between the ranks' hosts");  // no processors column
  const ClaimResult silent = judged("core_per_rank");
  EXPECT_EQ(silent.verdict, kOffHardware) << silent.why;
  EXPECT_NE(silent.why.find("does not say what cores its ranks had"), std::string::npos) << silent.why;
  EXPECT_EQ(judged("").verdict, "reproduced");  // a claim that does not ask
}

// This machine's range is widened by its class's spread from the results folder's stability pair;
// a GPU run's range is its own.
TEST_F(ClaimLedger, TheBetweenRunSpreadWidensThisMachinesRangesNotTheGpus) {
  write("x/r.csv", 1.03, 1.02, 1.04, "cpu", "measured: MPI between the ranks' hosts");
  write("cuda/x/r.csv", 1.03, 1.02, 1.04, "cuda", "measured: NCCL");
  EXPECT_EQ(judged("", "", "1.2").local.verdict, "partly");  // no stability pair: the range as measured
  std::ofstream(root / "claims_stability.csv") << "claim,first_verdict,second_verdict,same,first_value,second_value,runs\n"
                                                  "x.claim,partly,partly,yes,1.1,1.0,a\n";  // a 9.1% move
  const ClaimResult c = judged("", "", "1.2");
  EXPECT_EQ(c.local.verdict, kUnsettled) << c.local.why;
  EXPECT_NE(c.local.why.find("between-run spread (9.09%)"), std::string::npos) << c.local.why;
  EXPECT_EQ(c.gpu.verdict, "partly");  // 1.17x the paper's: within a factor of 1.3, not 1.15
}

// This machine says reproduced and the model at the paper's scale says not: the verdict is
// contradicted, and its line names the model's. A GPU run's verdict is not overruled.
TEST_F(ClaimLedger, AVerdictTheSuitesOtherSettingsContradictIsNotReproduced) {
  write("x/r.csv", 1.5, 1.45, 1.55, "cpu", "measured: MPI between the ranks' hosts");
  write("models/m.csv", 0.8, 0.8, 0.8, "model", "-");
  const ClaimResult local = judged("", "value(models/m.csv[].ratio)");
  EXPECT_EQ(local.local.verdict, "reproduced");
  EXPECT_EQ(local.model.verdict, "not reproduced");
  EXPECT_EQ(local.verdict, kContradicted);
  EXPECT_NE(local.why.find("contradicted by the model at the paper's scale (not reproduced"), std::string::npos) << local.why;
  EXPECT_EQ(judged("", "value(x/r.csv[].ratio)").verdict, "reproduced");  // agreeing settings
  write("cuda/x/r.csv", 1.4, 1.38, 1.41, "cuda", "measured: NCCL");
  const ClaimResult gpu = judged("", "value(models/m.csv[].ratio)");
  EXPECT_EQ(gpu.verdict, "reproduced");
  EXPECT_NE(gpu.why.find("the model at the paper's scale says (not reproduced"), std::string::npos) << gpu.why;
}

// The model overrules only where it reproduces the numbers its ratio is made of (model_base): a
// model whose own times are a third of the paper's does not speak for their ratio.
TEST_F(ClaimLedger, AModelOffInItsOwnBaseNumbersDoesNotContradict) {
  write("x/r.csv", 1.5, 1.45, 1.55, "cpu", "measured: MPI between the ranks' hosts");
  write("models/m.csv", 0.8, 0.8, 0.8, "model", "-");
  auto ledger = [&](double base_modelled) {
    write("models/b.csv", base_modelled, base_modelled, base_modelled, "model", "-");
    ClaimSpec base = spec("match:15");
    base.id = "x.base";
    base.quantity = "relative";
    base.paper_value = "1";
    base.model = "value(models/b.csv[].ratio)";
    ClaimSpec c = spec("match:15", "1");
    c.id = "x.claim";
    c.quantity = "relative";
    c.paper_value = "1.5";
    c.local = "value(x/r.csv[].ratio)";
    c.model = "value(models/m.csv[].ratio)";
    c.model_base = "x.base";
    return judge_claims({base, c}, root.string(), (root / "repo").string()).at(1);
  };
  const ClaimResult off = ledger(0.3);
  EXPECT_EQ(off.model.verdict, "not reproduced");
  EXPECT_EQ(off.verdict, "reproduced");
  EXPECT_NE(off.why.find("does not overrule: its own x.base is 0.3x the paper's (not reproduced)"), std::string::npos)
      << off.why;
  EXPECT_EQ(ledger(1.05).verdict, kContradicted);  // a model that holds its base numbers overrules
}

TEST_F(ClaimLedger, AModelBaseThatIsNoModelledClaimIsRefused) {
  const std::string header =
      "claim,paper,where,text,quantity,paper_value,unit,judge,baseline,hardware,local,gpu,model,why_not,cluster_command,"
      "note,relevant_hardware,model_base\n";
  std::ofstream(root / "claims.csv") << header << "a,000,-,-,relative,1,x,match:15,,,,,,,,,,b\n"
                                     << "b,000,-,-,relative,1,x,match:15,,,,,,,,,,\n";
  try {
    read_claim_specs((root / "claims.csv").string());
    FAIL() << "a model_base without a modelled number was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a: model_base 'b' is not a claim with a modelled number"), std::string::npos)
        << e.what();
  }
}

// GPU evidence judges only beside this machine's runs of the same measured code: not from an
// uncommitted tree, not across a change under kernels/ (and the like), not weeks apart.
TEST_F(ClaimLedger, GpuEvidenceOfOtherCodeIsShownNotUsed) {
  write("x/r.csv", 0.8, 0.75, 0.85, "cpu", "measured: MPI");  // not reproduced here
  write("cuda/x/r.csv", 1.45, 1.44, 1.46, "cuda", "measured: NCCL", first, "2026-12-02T00:00:00Z");
  EXPECT_EQ(judged("").verdict, "reproduced");  // the same commit, a day apart: the GPU run judges
  write("cuda/x/r.csv", 1.45, 1.44, 1.46, "cuda", "measured: NCCL", first + "-dirty");
  ClaimResult c = judged("");
  EXPECT_EQ(c.gpu.verdict, kStaleEvidence);
  EXPECT_EQ(c.verdict, "not reproduced");  // this machine's, and the GPU number said beside it
  EXPECT_NE(c.why.find("is not used: cuda/x/r.csv: the GPU run is of an uncommitted tree"), std::string::npos) << c.why;
  write("cuda/x/r.csv", 1.45, 1.44, 1.46, "cuda", "measured: NCCL", first, "2026-11-01T00:00:00Z");
  EXPECT_NE(judged("").gpu.why.find("30 days apart, more than 14"), std::string::npos) << judged("").gpu.why;
  const std::string docs = commit("docs/x.md", "words");  // code the measurements do not run
  write("x/r.csv", 0.8, 0.75, 0.85, "cpu", "measured: MPI", docs);
  write("cuda/x/r.csv", 1.45, 1.44, 1.46, "cuda", "measured: NCCL", first);
  EXPECT_EQ(judged("").verdict, "reproduced");
  std::string kernel = commit("kernels/gemm.cpp", "2");
  write("x/r.csv", 0.8, 0.75, 0.85, "cpu", "measured: MPI", kernel);
  c = judged("");
  EXPECT_EQ(c.gpu.verdict, kStaleEvidence);
  EXPECT_NE(c.gpu.why.find("the measured code changed between the GPU run's " + first + " and this machine's " + kernel +
                           ": kernels/ (1 file)"),
            std::string::npos)
      << c.gpu.why;
  // The scripts that size a run and the build's presets shape it too; the papers' numbers do not.
  for (const auto& [path, folder] : {std::pair<std::string, std::string>{"experiments/moe/run.sh", "experiments/ (1 file)"},
                                     {"models/step_model.cpp", "models/ (1 file)"},
                                     {"CMakePresets.json", "CMakePresets.json (1 file)"}}) {
    const std::string changed = commit(path, "1");
    write("x/r.csv", 0.8, 0.75, 0.85, "cpu", "measured: MPI", changed);
    write("cuda/x/r.csv", 1.45, 1.44, 1.46, "cuda", "measured: NCCL", kernel);
    c = judged("");
    EXPECT_EQ(c.gpu.verdict, kStaleEvidence) << path;
    EXPECT_NE(c.gpu.why.find(": " + folder), std::string::npos) << c.gpu.why;
    kernel = changed;  // the next GPU run is of this commit
  }
  const std::string reference = commit("experiments/reference/claims.csv", "1");
  write("x/r.csv", 0.8, 0.75, 0.85, "cpu", "measured: MPI", reference);
  write("cuda/x/r.csv", 1.45, 1.44, 1.46, "cuda", "measured: NCCL", kernel);
  EXPECT_EQ(judged("").verdict, "reproduced") << judged("").gpu.why;
  write("cuda/x/r.csv", 1.45, 1.44, 1.46, "cuda", "measured: NCCL", "0123abc");
  EXPECT_NE(judged("").gpu.why.find("0123abc is not in this checkout's history"), std::string::npos) << judged("").gpu.why;
}

// Two ledgers of one commit, claim by claim: the share of claims with a run verdict (in either)
// that got the same both times, and which flipped; a modelled or unmeasurable claim is not counted.
TEST_F(ClaimExpression, TwoRunsLedgersAgreeClaimByClaim) {
  std::ofstream(root / "one.csv") << "claim,verdict,why,local_value,gpu_value\n"
                                     "a,reproduced,this machine (x): ...,1.5,-\n"
                                     "b,partly,this machine (x): ...,1.2,-\n"
                                     "c,modelled only,the model ...,-,-\n"
                                     "d,noise,GPU run (y): ...,-,0.9\n";
  std::ofstream(root / "two.csv") << "claim,verdict,why,local_value,gpu_value\n"
                                     "a,reproduced,this machine (x): ...,1.45,-\n"
                                     "b,not reproduced,this machine (x): ...,0.95,-\n"
                                     "c,modelled only,the model ...,-,-\n"
                                     "d,noise,GPU run (y): ...,-,1.1\n";
  const Agreement a = compare_ledgers(CsvRows::read((root / "one.csv").string()), CsvRows::read((root / "two.csv").string()));
  EXPECT_EQ(a.run_verdicts, 3);
  EXPECT_EQ(a.same, 2);
  ASSERT_EQ(a.flipped().size(), 1u);
  EXPECT_EQ(a.flipped()[0]->claim, "b");
  EXPECT_EQ(a.flipped()[0]->first_value, "1.2");
  EXPECT_EQ(a.flipped()[0]->second_value, "0.95");
  const std::string csv = stability_csv(a, "two runs of abc1234");
  EXPECT_NE(csv.find("b,partly,not reproduced,no,1.2,0.95,two runs of abc1234"), std::string::npos) << csv;
  EXPECT_NE(csv.find("c,modelled only,modelled only,-,"), std::string::npos) << csv;
  // How far apart the numbers are: a 0.05/1.5, b 0.25/1.2, d 0.2/1.1 (c has none): the median is d's.
  ASSERT_TRUE(median_relative_difference(a.pairs).has_value());
  EXPECT_NEAR(*median_relative_difference(a.pairs), 0.2 / 1.1, 1e-12);
  EXPECT_FALSE(median_relative_difference({}).has_value());
  // A number the same in both runs (a count) cannot move: it is not in the median.
  EXPECT_FALSE(median_relative_difference({VerdictPair{"count", "reproduced", "reproduced", "2", "2", true}}).has_value());
  // Only the claims that read a CSV the second run wrote again count, when it says which.
  std::ofstream(root / "four.csv") << "claim,verdict,why,local_value,gpu_value,local_csv,gpu_csv\n"
                                      "a,reproduced,this machine: ...,1.5,-,x/a.csv,-\n"
                                      "b,partly,this machine: ...,1.2,-,x/b.csv x/c.csv,-\n"
                                      "c,modelled only,the model ...,-,-,-,-\n"
                                      "d,noise,GPU run: ...,-,0.9,-,x/d.csv\n";
  const Agreement some = compare_ledgers(CsvRows::read((root / "four.csv").string()),
                                         CsvRows::read((root / "two.csv").string()), {"x/c.csv", "cuda/x/d.csv"});
  EXPECT_EQ(some.run_verdicts, 2);  // b (through x/c.csv) and d (its GPU CSV); a's CSV was not rerun
  EXPECT_EQ(some.same, 1);
  std::ofstream(root / "three.csv") << "claim,verdict,why,local_value,gpu_value\na,reproduced,x,1,-\n";
  EXPECT_THROW(compare_ledgers(CsvRows::read((root / "one.csv").string()), CsvRows::read((root / "three.csv").string())),
               Error);
}

}  // namespace
}  // namespace moebench
