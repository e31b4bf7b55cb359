// Algorithm 1 of MPMoE on a synthetic cost: a parabola in n whose bottom moves up with B
// (n* = B / 1000, as the paper's hypotheses have it), and on the model's layer times.
#include <gtest/gtest.h>
#include <cmath>
#include <fstream>
#include "models/csv_rows.h"
#include "models/hardware_profile.h"
#include "moe/granularity_search.h"
#include "tools/mpmoe_projection.h"

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

// The hypothesis the early stop rests on: down to one bottom, up after it (either side may be empty).
TEST(GranularitySearch, ParabolaLikeIsOneBottom) {
  EXPECT_TRUE(GranularitySearch::parabola_like({3, 2, 1, 2, 3}));
  EXPECT_TRUE(GranularitySearch::parabola_like({1, 2, 3}));
  EXPECT_TRUE(GranularitySearch::parabola_like({3, 2, 2, 1}));
  EXPECT_TRUE(GranularitySearch::parabola_like({2}));
  EXPECT_FALSE(GranularitySearch::parabola_like({1, 3, 2, 4}));  // a second bottom: the search would stop at 1
  EXPECT_FALSE(GranularitySearch::parabola_like({2, 1, 2, 1}));
}

// Sec. 4.1 on the model's layer times: every B of the sweep is asked once per strategy, so the
// exhaustive search profiles each at n = 2..8; Algorithm 1 profiles at most that, and no more than
// its searches at 7 points each.
TEST(GranularitySearch, OnTheModelsTimesItProfilesAFractionOfTheExhaustiveSearch) {
  const ProjectedTable t = project_mpmoe_search(load_hardware_profile(resolve_profile("mpmoe-adira")));
  const std::string path = testing::TempDir() + "mpmoe_search.csv";
  std::ofstream(path) << t.table.to_string(nullptr);
  const CsvRows rows = CsvRows::read(path);
  ASSERT_EQ(rows.size(), 4u);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    auto num = [&](const char* c) { return std::stod(rows.cell(r, c)); };
    EXPECT_EQ(num("b_values"), 32768 / kSearchBStep);
    EXPECT_EQ(num("exhaustive_points"), num("b_values") * 7);
    EXPECT_GT(num("algorithm1_points"), 0);
    EXPECT_LE(num("algorithm1_points"), num("algorithm1_searches") * 7);
    EXPECT_LT(num("algorithm1_searches"), num("b_values")) << "every B searched: the ranges were not used";
    const double ratio = num("exhaustive_points") / num("algorithm1_points");
    EXPECT_NEAR(num("exhaustive_over_algorithm1"), ratio, 1e-3 * ratio);
    EXPECT_GE(num("worst_ms_over_best"), 1.0);
    for (const char* share : {"same_n_as_exhaustive", "parabola_like"}) {
      EXPECT_GE(num(share), 0.0);
      EXPECT_LE(num(share), 1.0);
    }
  }
}

}  // namespace moebench
