// Nested breakdown ranges: each recorded under its path among the ranges open when it began, and
// summarised over runs as a tree whose "(other)" rows hold what a parent's children leave out.
#include <gtest/gtest.h>
#include <chrono>
#include <thread>
#include "harness/range_tree.h"

namespace moebench {

TEST(Breakdown, NestedRangesAreRecordedUnderTheirPaths) {
  Breakdown b;
  Stream s, side;
  {
    ScopedRange step("step", s, &b);
    for (int i = 0; i < 2; ++i) {
      ScopedRange fwd("fwd", s, &b);
      ScopedRange on_side("gemm", side, &b);  // nesting follows the host's scopes, not the stream
    }
    ScopedRange untimed("nvtx.only", s);  // no breakdown: no path, no effect on the others'
    ScopedRange opt("opt", s, &b);
  }
  ScopedRange after("step", s, &b);  // a root again once the first closed
  const auto totals = b.path_totals();
  ASSERT_EQ(totals.size(), 4u);
  EXPECT_EQ(totals[0].path, "step");
  EXPECT_EQ(totals[1].path, "step/fwd");
  EXPECT_EQ(totals[2].path, "step/fwd/gemm");
  EXPECT_EQ(totals[3].path, "step/opt");
  EXPECT_EQ(totals[1].calls, 2);
  EXPECT_EQ(totals[2].calls, 2);
  EXPECT_EQ(totals[0].calls, 1);  // the second "step" is still open
  EXPECT_EQ(b.totals_ms().count("gemm"), 1u);  // names still add up by name
}

namespace {
using Totals = std::vector<Breakdown::PathTotal>;
Totals run(double step, double fwd, double gemm, double opt) {
  return {{"step", step, 1}, {"step/fwd", fwd, 2}, {"step/fwd/gemm", gemm, 2}, {"step/opt", opt, 1}};
}
}  // namespace

TEST(RangeTree, ChildrenAndTheirRestAddUpToTheParentInEveryRun) {
  const auto rows = range_tree({run(10, 6, 5, 3), run(12, 7, 5, 4), run(11, 6, 6, 3)});
  std::vector<std::string> paths;
  for (const auto& r : rows) paths.push_back(r.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"step", "step/fwd", "step/fwd/gemm", "step/fwd/(other)", "step/opt",
                                            "step/(other)"}));
  EXPECT_EQ(rows[0].depth, 0);
  EXPECT_EQ(rows[2].depth, 2);
  EXPECT_EQ(rows[3].depth, 2);
  EXPECT_FALSE(rows[0].leaf);
  EXPECT_TRUE(rows[2].leaf);
  EXPECT_TRUE(rows[3].other);
  EXPECT_EQ(rows[3].calls, 0);
  EXPECT_EQ(rows[1].calls, 2);
  // fwd's rest per run: 1, 2, 0; the step's: 1, 1, 2.
  EXPECT_DOUBLE_EQ(rows[3].ms.median, 1);
  EXPECT_DOUBLE_EQ(rows[3].ms.min, 0);
  EXPECT_DOUBLE_EQ(rows[3].ms.max, 2);
  EXPECT_DOUBLE_EQ(rows[5].ms.median, 1);
  EXPECT_DOUBLE_EQ(rows[5].ms.max, 2);
  EXPECT_DOUBLE_EQ(rows[0].ms.median, 11);
  EXPECT_DOUBLE_EQ(rows[0].share, 1);
  EXPECT_DOUBLE_EQ(rows[4].share, 3.0 / 11);
  EXPECT_EQ(rows[4].ms.samples, 3);
}

TEST(RangeTree, RunsOfOtherWorkAreRefused) {
  Totals fewer = run(10, 6, 5, 3);
  fewer.pop_back();
  EXPECT_THROW(range_tree({run(10, 6, 5, 3), fewer}), Error);
  Totals renamed = run(10, 6, 5, 3);
  renamed[3].path = "step/adam";
  EXPECT_THROW(range_tree({run(10, 6, 5, 3), renamed}), Error);
  Totals more_calls = run(10, 6, 5, 3);
  more_calls[1].calls = 3;
  try {
    range_tree({run(10, 6, 5, 3), more_calls});
    ADD_FAILURE() << "a run with another range count was summarised";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step/fwd ran 3 times in run 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(range_tree({}), Error);
}

}  // namespace moebench
