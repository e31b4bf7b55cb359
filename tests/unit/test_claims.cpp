// The claim ledger's parts: the expressions over a results folder (cells with their runs'
// ranges, selections, aggregates, row expressions, what is missing and why) and the verdicts by
// tolerance class, noise included.
#include <gtest/gtest.h>
#include <filesystem>
#include <fstream>
#include "kernels/exec.h"
#include "tools/claims/expression.h"
#include "tools/claims/ledger.h"

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
  fs::path root;
};

TEST_F(ClaimExpression, ACellCarriesItsRunsRange) {
  const Evaluation e = eval("value(t/a.csv[model=Dense].step_ms)");
  ASSERT_TRUE(e.value) << e.missing;
  EXPECT_EQ(e.value->v, 10);
  EXPECT_EQ(e.value->lo, 9);
  EXPECT_EQ(e.value->hi, 12);
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
  EXPECT_EQ(judge_number(spec("match:15", "1"), 2.0, Number::exact(1.3)).verdict, "partly");  // the paper's side of 1
  EXPECT_EQ(judge_number(spec("match:15", "1"), 2.0, Number::exact(0.9)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("within:5"), 38, Number::exact(34)).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("within:5"), 38, Number::exact(30)).verdict, "partly");
  EXPECT_EQ(judge_number(spec("within:5"), 38, Number::exact(20)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, Number::exact(1.8)).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, Number::exact(1.3)).verdict, "partly");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, Number::exact(0.8)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("at_most", "1"), 0.7, Number::exact(0.6)).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("above:1"), 9.8, Number::exact(1.2)).verdict, "reproduced");
  EXPECT_EQ(judge_number(spec("above:1"), 9.8, Number::exact(0.9)).verdict, "not reproduced");
  EXPECT_EQ(judge_number(spec("below:1"), 0.5, Number::exact(0.9)).verdict, "reproduced");
  EXPECT_THROW(judge_number(spec("roughly"), 1, Number::exact(1)), Error);
  EXPECT_THROW(judge_number(spec("match:"), 1, Number::exact(1)), Error);
}

TEST(ClaimVerdict, NoiseWhenTheSpreadHoldsNoEffectAndIsAsWideAsTheEffect) {
  // Paper 1.25 (an effect of 0.25 over 1): a range [0.9, 1.3] holds 1 and is 0.4 wide.
  EXPECT_EQ(judge_number(spec("match:15", "1"), 1.25, {1.1, 0.9, 1.3}).verdict, "noise");
  // The same range against a claimed 1.75: narrower than the effect, judged by its median.
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, {1.1, 0.9, 1.3}).verdict, "partly");
  EXPECT_EQ(judge_number(spec("at_least", "1"), 1.75, {0.9, 0.7, 1.05}).verdict, "not reproduced");
  // Ordering: the range holds the threshold and is as wide as the paper's distance from it.
  EXPECT_EQ(judge_number(spec("above:1"), 1.29, {1.1, 0.69, 1.23}).verdict, "noise");
  EXPECT_EQ(judge_number(spec("above:1"), 9.8, {1.1, 0.9, 1.3}).verdict, "reproduced");
  // No range (a count, a model's number): never noise.
  EXPECT_EQ(judge_number(spec("match:15", "1"), 1.25, Number::exact(1.0)).verdict, "not reproduced");
}

TEST(ClaimVerdict, TheOtherVerdictsTheRangeReachesAreNamed) {
  // At least 1.75 over 1: the median 1.1 is partly; the range's low end, 0.9, is on the other side.
  const Judgement below = judge_number(spec("at_least", "1"), 1.75, {1.1, 0.9, 1.3});
  EXPECT_EQ(below.verdict, "partly");
  EXPECT_EQ(below.reaches, std::vector<std::string>{"not reproduced"});
  EXPECT_NE(below.why.find("; its range reaches not reproduced"), std::string::npos) << below.why;
  // Within 15% of 2: both ends are off by 20%, one verdict named once.
  const Judgement both = judge_number(spec("match:15"), 2.0, {2.1, 1.6, 2.4});
  EXPECT_EQ(both.verdict, "reproduced");
  EXPECT_EQ(both.reaches, std::vector<std::string>{"partly"});
  // A range inside its verdict, a number with no range, and noise reach nothing.
  for (const Judgement& j : {judge_number(spec("match:15"), 2.0, {2.1, 2.0, 2.2}),
                             judge_number(spec("match:15"), 2.0, Number::exact(1.6)),
                             judge_number(spec("match:15", "1"), 1.25, {1.1, 0.9, 1.3})}) {
    EXPECT_TRUE(j.reaches.empty()) << j.verdict << ": " << j.why;
    EXPECT_EQ(j.why.find("reaches"), std::string::npos) << j.why;
  }
}

}  // namespace
}  // namespace moebench
