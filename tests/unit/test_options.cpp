#include <gtest/gtest.h>
#include "harness/layout.h"
#include "harness/options.h"

namespace moebench {

TEST(ParseSize, AcceptsPlainAndSuffixedSizes) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("64K"), 65536u);
  EXPECT_EQ(parse_size("16M"), 16u << 20);
  EXPECT_EQ(parse_size("1G"), 1ull << 30);
  EXPECT_EQ(parse_size("2kb"), 2048u);
}

TEST(ParseSize, RejectsMalformedSizes) {
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("K"));
  EXPECT_FALSE(parse_size("12X"));
  EXPECT_FALSE(parse_size("-4"));
  EXPECT_FALSE(parse_size("1.5M"));
  EXPECT_FALSE(parse_size("99999999999999999999"));
}

TEST(ParseSize, FormatRoundTrips) {
  for (std::uint64_t b : {1ull, 1000ull, 1024ull, 3ull << 20, 1ull << 30})
    EXPECT_EQ(parse_size(format_size(b)), b) << b;
}

TEST(CommonOptions, RejectUnknownValuesNamingTheOption) {
  CommonOptions o;
  CLI::App app("t");
  add_common_options(app, o);
  try {
    app.parse(std::vector<std::string>{"gpu", "--backend"});  // CLI11 takes the arguments reversed
    FAIL() << "--backend gpu accepted";
  } catch (const CLI::ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("--backend"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

TEST(CommonOptions, ParseScaleAndDtype) {
  CommonOptions o;
  CLI::App app("t");
  add_common_options(app, o);
  app.parse(std::vector<std::string>{"bf16", "--dtype", "paper", "--scale"});
  EXPECT_EQ(o.scale_kind(), Scale::paper);
  EXPECT_EQ(o.dtype_kind(), DType::bf16);
}

TEST(ParallelLayout, GroupsFollowMegatronOrder) {
  ParallelLayout l;
  ASSERT_FALSE(ParallelLayout::make(8, 2, 2, 1, &l));
  EXPECT_EQ(l.dp, 2);
  // rank = (pp * dp + dp_index) * tp + tp_index
  EXPECT_EQ(l.tp_index(5), 1);
  EXPECT_EQ(l.dp_index(5), 0);
  EXPECT_EQ(l.pp_index(5), 1);
  EXPECT_EQ(l.tp_color(4), l.tp_color(5));
  EXPECT_NE(l.tp_color(3), l.tp_color(4));
  EXPECT_EQ(l.dp_color(1), l.dp_color(3));
  EXPECT_EQ(l.pp_color(1), l.pp_color(5));
}

TEST(ParallelLayout, RejectsRankCountsItCannotUse) {
  ParallelLayout l;
  auto e = ParallelLayout::make(6, 4, 1, 1, &l);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("--tp"), std::string::npos) << *e;
  e = ParallelLayout::make(8, 1, 1, 3, &l);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("--ep"), std::string::npos) << *e;
  EXPECT_TRUE(ParallelLayout::make(4, 0, 1, 1, &l));
}

}  // namespace moebench
