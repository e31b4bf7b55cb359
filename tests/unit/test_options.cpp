#include <gtest/gtest.h>
#include "models/layout.h"
#include "harness/options.h"
#include <CLI/CLI.hpp>
#include <algorithm>

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

// Typed options: "not given" stays nullopt, every typed value is checked, messages say what is allowed.
static std::string parse_error(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return usage_message(e, app);
  }
  return "";
}

TEST(TypedOptions, NotGivenIsDistinctFromEveryValue) {
  CLI::App app("t");
  std::optional<int> tokens;
  add_whole(app, "--tokens", tokens, 1, 1 << 30, "Tokens");
  EXPECT_EQ(parse_error(app, {}), "");
  EXPECT_FALSE(tokens.has_value());
  EXPECT_EQ(parse_error(app, {"--tokens", "7"}), "");
  EXPECT_EQ(tokens, 7);
}

// An unknown option gets the suite's one line, the nearest valid option and a pointer to --help.
TEST(TypedOptions, UnknownOptionsNameTheNearestOne) {
  CLI::App app("t");
  std::optional<int> tokens, top_k;
  add_whole(app, "--tokens", tokens, 1, 1 << 30, "Tokens");
  add_whole(app, "--top-k", top_k, 1, 8, "k");
  EXPECT_EQ(parse_error(app, {"--tokenz", "5"}), "--tokenz: is not an option; did you mean --tokens? (--help lists the options)");
  EXPECT_EQ(parse_error(app, {"--top_k=2"}), "--top_k: is not an option; did you mean --top-k? (--help lists the options)");
  EXPECT_EQ(parse_error(app, {"--seed", "1"}), "--seed: is not an option (--help lists the options)");
  EXPECT_EQ(parse_error(app, {"stray"}), "'stray': is not an option or the value of one (--help lists the options)");
}

TEST(TypedOptions, WholeNumbersAreCheckedAndExplained) {
  CLI::App app("t");
  std::optional<int> tokens;
  add_whole(app, "--tokens", tokens, 1, 1 << 30, "Tokens");
  EXPECT_EQ(parse_error(app, {"--tokens", "-5"}),
            "--tokens: '-5' is out of range; allowed: a whole number from 1 to 1073741824");
  EXPECT_EQ(parse_error(app, {"--tokens", "1e3"}),
            "--tokens: '1e3' is not a whole number; allowed: a whole number from 1 to 1073741824");
  EXPECT_EQ(parse_error(app, {"--tokens", "99999999999999999999"}),
            "--tokens: '99999999999999999999' is not a whole number; allowed: a whole number from 1 to 1073741824");
  EXPECT_EQ(parse_error(app, {"--tokens"}), "--tokens: needs a value; allowed: a whole number from 1 to 1073741824");
  EXPECT_FALSE(tokens.has_value());
  EXPECT_EQ(parse_error(app, {"--tokens", "3", "--tokens", "5"}), "");  // the last one wins
  EXPECT_EQ(tokens, 5);
}

TEST(TypedOptions, RealsMustBeFiniteAndInRange) {
  CLI::App app("t");
  std::optional<double> lr, coef;
  std::vector<double> list;
  add_real(app, "--lr", lr, above(0), "Learning rate");
  add_real(app, "--aux-coef", coef, at_least(0), "Coefficient");
  add_reals(app, "--gammas", list, above(0), "Factors");
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "1e400"})
    EXPECT_EQ(parse_error(app, {"--lr", bad}), std::string("--lr: '") + bad + "' is not a finite number; allowed: a number > 0");
  EXPECT_EQ(parse_error(app, {"--lr", "0"}), "--lr: '0' is out of range; allowed: a number > 0");
  EXPECT_EQ(parse_error(app, {"--lr", "x"}), "--lr: 'x' is not a number; allowed: a number > 0");
  EXPECT_EQ(parse_error(app, {"--aux-coef", "-0.1"}), "--aux-coef: '-0.1' is out of range; allowed: a number >= 0");
  EXPECT_EQ(parse_error(app, {"--aux-coef", "0"}), "");
  EXPECT_EQ(coef, 0.0);
  EXPECT_NE(parse_error(app, {"--gammas", "1.25,inf"}).find("'inf' is not a finite number"), std::string::npos);
  EXPECT_EQ(parse_error(app, {"--gammas", "1.25,2"}), "");
  EXPECT_EQ(list, (std::vector<double>{1.25, 2.0}));
}

TEST(TypedOptions, ChoicesAndPaths) {
  CLI::App app("t");
  std::string gemm = "grouped", out = "results";
  std::vector<std::string> which;
  add_choice(app, "--expert-gemm", gemm, {"grouped", "serial"}, "Mode");
  add_choices(app, "--dispatchers", which, {"local", "ppmoe"}, "Which");
  add_path(app, "--out", out, "Folder");
  EXPECT_EQ(parse_error(app, {"--expert-gemm", "batched"}),
            "--expert-gemm: 'batched' is not one of the choices; allowed: grouped or serial");
  EXPECT_NE(parse_error(app, {"--dispatchers", "local,local"}).find("'local' is given twice"), std::string::npos);
  EXPECT_EQ(parse_error(app, {"--out", ""}), "--out: '' is an empty path; allowed: a file or folder path");
  EXPECT_EQ(out, "results");
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
