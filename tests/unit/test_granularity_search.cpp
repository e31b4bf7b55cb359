// Algorithm 1 of MPMoE on a synthetic cost: a parabola in n whose bottom moves up with B
// (n* = B / 1000, as the paper's hypotheses have it).
#include <gtest/gtest.h>
#include <cmath>
#include "moe/granularity_search.h"

namespace moebench {

namespace {
double cost(int B, int n) {
  const double bottom = B / 1000.0;
  return 10.0 + (n - bottom) * (n - bottom);
}
struct Counted {
  int B;
  std::vector<int> asked;
  double operator()(int n) {
    asked.push_back(n);
    return cost(B, n);
  }
};
}  // namespace

TEST(GranularitySearch, FindsTheBottomOfTheParabolaAndStopsPastIt) {
  GranularitySearch g;
  Counted p{4000, {}};
  EXPECT_EQ(g.best(4000, std::ref(p)), 4);
  EXPECT_EQ(p.asked, (std::vector<int>{2, 3, 4, 5}));  // 5 is worse than 4: stop, 6..8 never run
  EXPECT_EQ(g.stats().profiled_points, 4);
  EXPECT_DOUBLE_EQ(g.stats().profile_ms, cost(4000, 2) + cost(4000, 3) + cost(4000, 4) + cost(4000, 5));
  // n = 4 is new: its range is (4000, 4000).
  EXPECT_EQ(g.ranges().at(4).floor, 4000);
  EXPECT_EQ(g.ranges().at(4).ceil, 4000);
}

TEST(GranularitySearch, CachedAndKnownRangesProfileNothingAndNeighboursProfileLess) {
  GranularitySearch g;
  Counted first{4000, {}};
  g.best(4000, std::ref(first));
  Counted again{4000, {}};
  EXPECT_EQ(g.best(4000, std::ref(again)), 4);  // the cache
  EXPECT_TRUE(again.asked.empty());
  EXPECT_EQ(g.stats().cache_hits, 1);
  // 7000: above n = 4's range: searched from 4 up, not from 2 as a fresh search is.
  Counted high{7000, {}}, fresh{7000, {}};
  EXPECT_EQ(g.best(7000, std::ref(high)), 7);
  EXPECT_EQ(GranularitySearch().best(7000, std::ref(fresh)), 7);
  EXPECT_EQ(high.asked.front(), 4);
  EXPECT_LT(high.asked.size(), fresh.asked.size());
  // 6500 is between 4's and 7's ranges: searched from 4 to 7; 7's range grows to take it.
  Counted between{6500, {}};
  const int n = g.best(6500, std::ref(between));
  EXPECT_TRUE(n == 6 || n == 7) << n;
  EXPECT_GE(between.asked.front(), 4);
  EXPECT_LE(between.asked.back(), 7);
  // 4100 is best at n = 4 too: 4's range grows to (4000, 4100); 4050 is then inside it and
  // profiles nothing.
  Counted grow{4100, {}};
  EXPECT_EQ(g.best(4100, std::ref(grow)), 4);
  EXPECT_EQ(g.ranges().at(4).floor, 4000);
  EXPECT_EQ(g.ranges().at(4).ceil, 4100);
  Counted known{4050, {}};
  EXPECT_EQ(g.best(4050, std::ref(known)), 4);
  EXPECT_TRUE(known.asked.empty());
  EXPECT_EQ(g.stats().range_hits, 1);
  // Small B: n never exceeds the tokens.
  Counted tiny{3, {}};
  EXPECT_LE(g.best(3, std::ref(tiny)), 3);
}

TEST(GranularitySearch, ASavedSearchIsReusedWithoutProfiling) {
  GranularitySearch g;
  Counted p{4000, {}};
  g.best(4000, std::ref(p));
  GranularitySearch later;
  ASSERT_FALSE(later.load(g.rows()));
  Counted q{4000, {}};
  EXPECT_EQ(later.best(4000, std::ref(q)), 4);
  EXPECT_TRUE(q.asked.empty());
  EXPECT_EQ(later.ranges().size(), g.ranges().size());
  // Rows that cannot be a search are refused with what is wrong.
  EXPECT_TRUE(later.load({{"range", 3, 5, 1, 0}}));
  EXPECT_TRUE(later.load({{"bogus", 3, 0, 0, 0}}));
  EXPECT_TRUE(later.load({}));
}

}  // namespace moebench
