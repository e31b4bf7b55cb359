#include <gtest/gtest.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>
#include "comm/comm.h"
#include "harness/layer_case.h"
#include "harness/layer_runner.h"
#include "harness/output_check.h"
#include "runtime/range.h"
#include "harness/progress.h"
#include "harness/spread.h"
#include "models/paper_specs.h"

namespace moebench {

TEST(SelfCommunicator, CollectivesAreCopiesOfOwnData) {
  auto c = make_self_communicator();
  Stream s;
  EXPECT_EQ(c->size(), 1);
  std::vector<float> in = {1, 2, 3, 4}, out(4, 0);
  c->all_reduce(in.data(), out.data(), 4, DType::f32, ReduceOp::sum, s);
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), 0.f);
  c->all_to_all_v(in.data(), {3}, {1}, out.data(), {3}, {0}, DType::f32, s);
  EXPECT_EQ(out, (std::vector<float>{2, 3, 4, 0}));
  EXPECT_THROW(c->send(in.data(), 1, DType::f32, 1, s), Error);
  EXPECT_EQ(c->split(5, 0)->size(), 1);
}

// --check-options validates against the world a launch would make; nothing travels in it.
TEST(UnlaunchedWorld, HasTheLaunchsSizeAndCarriesNothing) {
  auto c = make_unlaunched_world(64);
  Stream s;
  EXPECT_EQ(c->size(), 64);
  EXPECT_EQ(c->rank(), 0);
  std::vector<float> in = {1, 2}, out(2, 0);
  try {
    c->all_reduce(in.data(), out.data(), 2, DType::f32, ReduceOp::sum, s);
    ADD_FAILURE() << "an unlaunched world ran an all-reduce";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--check-options"), std::string::npos) << e.what();
  }
  EXPECT_EQ(out, (std::vector<float>{0, 0}));
  EXPECT_THROW(c->split(0, 0), Error);
  EXPECT_THROW(make_unlaunched_world(0), Error);
}

TEST(Breakdown, RangesTimeTheirRegionByName) {
  Breakdown b;
  Stream s;
  for (int i = 0; i < 2; ++i) {
    ScopedRange outer("moe.expert", s, &b);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ScopedRange inner("moe.gating", s, &b);
  }
  const auto t = b.totals_ms();
  ASSERT_EQ(b.names().size(), 2u);
  EXPECT_EQ(b.names()[0], "moe.gating");  // the inner range closes first
  EXPECT_GE(t.at("moe.expert"), 10.0);
  EXPECT_LT(t.at("moe.gating"), t.at("moe.expert"));
  b.clear();
  EXPECT_TRUE(b.totals_ms().empty());
}

TEST(Spread, MedianQuartilesAndRange) {
  const Spread s = spread_of({5, 1, 4, 2, 3});
  EXPECT_EQ(s.samples, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  EXPECT_DOUBLE_EQ(spread_of({1, 2, 3, 4}).median, 2.5);
  EXPECT_DOUBLE_EQ(s.relative_range(), 4.0 / 3.0);
  EXPECT_THROW(spread_of({}), Error);
  EXPECT_THROW(spread_of({1.0, std::nan("")}), Error);  // a failed measurement is not a sample
}

// The median's interval from order statistics: 5 samples give min..max (coverage 1 - 2/32); 10
// give the second smallest and the second largest (1 - 2 * 11/1024), since the third ones would
// cover less than 90%; 3 samples cannot reach 90%, so min..max with 75%.
TEST(Spread, TheMediansIntervalFromOrderStatistics) {
  const MedianInterval five = median_interval({1.3, 1.1, 1.5, 1.2, 1.4});
  EXPECT_DOUBLE_EQ(five.median, 1.3);
  EXPECT_DOUBLE_EQ(five.lo, 1.1);
  EXPECT_DOUBLE_EQ(five.hi, 1.5);
  EXPECT_DOUBLE_EQ(five.coverage, 1 - 2.0 / 32);
  const MedianInterval ten = median_interval({10, 1, 9, 2, 8, 3, 7, 4, 6, 5});
  EXPECT_DOUBLE_EQ(ten.lo, 2);
  EXPECT_DOUBLE_EQ(ten.hi, 9);
  EXPECT_DOUBLE_EQ(ten.coverage, 1 - 2 * 11.0 / 1024);
  EXPECT_DOUBLE_EQ(median_interval({3, 1, 2}).coverage, 0.75);
  EXPECT_THROW(median_interval({}), Error);
  // As a CSV cell and back; a cell of one number, or none, is no repetitions.
  EXPECT_EQ(repetitions_cell({1.25, 0.5, 3}), "1.25;0.5;3");
  EXPECT_EQ(parse_repetitions("1.25;0.5;3"), (std::vector<double>{1.25, 0.5, 3}));
  EXPECT_TRUE(parse_repetitions("4").empty());
  EXPECT_TRUE(parse_repetitions("1;x").empty());
  EXPECT_TRUE(parse_repetitions("").empty());
}

TEST(Spread, FastestAndThoseTheSpreadCouldHaveMadeFastest) {
  // Medians 10, 8, 9, 12, 20: the second is fastest. The slowest run of each is at least 11
  // (the second's), so the first (fastest run 9) and the fourth (11) could have been fastest
  // too, the fifth (19) not.
  const std::vector<Spread> times = {spread_of({9, 10, 13}), spread_of({7, 8, 11}), spread_of({8.5, 9, 12}),
                                     spread_of({11, 12, 14}), spread_of({19, 20, 21})};
  const Fastest f = fastest_of(times);
  EXPECT_EQ(f.best, 1u);
  EXPECT_EQ(f.first, 0u);
  EXPECT_EQ(f.last, 3u);
  // Runs that do not overlap leave the best alone; so does one candidate.
  const Fastest apart = fastest_of({spread_of({5, 6}), spread_of({1, 2}), spread_of({3, 4})});
  EXPECT_EQ(apart.best, 1u);
  EXPECT_EQ(apart.first, 1u);
  EXPECT_EQ(apart.last, 1u);
  const Fastest one = fastest_of({spread_of({3, 4})});
  EXPECT_EQ(one.best, 0u);
  EXPECT_EQ(one.last, 0u);
  // Equal medians: the first is the best.
  EXPECT_EQ(fastest_of({spread_of({2, 3}), spread_of({2, 3})}).best, 0u);
  EXPECT_THROW(fastest_of({}), Error);
}

namespace fs = std::filesystem;

TEST(OutputCheck, FindsUnwritableOutputsWithoutWritingAnything) {
  const fs::path tmp = fs::temp_directory_path() / ("moebench_outcheck_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  // A folder that does not exist yet under a writable one is fine, and is not created.
  EXPECT_FALSE(check_output_folder("--out", (tmp / "a" / "b").string()));
  EXPECT_FALSE(fs::exists(tmp / "a"));
  EXPECT_TRUE(fs::is_empty(tmp));
  // A path through a regular file, a read-only file system, an empty path, a folder as a file.
  { std::ofstream(tmp / "file") << "x"; }
  auto e = check_output_folder("--out", (tmp / "file" / "sub").string());
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("--out"), std::string::npos);
  EXPECT_NE(e->find("is not a folder"), std::string::npos) << *e;
  e = check_output_folder("--dump", "/proc/moebench-test");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rfind("--dump: '/proc/moebench-test' is not writable", 0), 0u) << *e;
  EXPECT_TRUE(check_output_folder("--out", ""));
  e = check_output_file("--benchmark_out", tmp.string());
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("is a folder"), std::string::npos) << *e;
  EXPECT_FALSE(check_output_file("--benchmark_out", (tmp / "run.json").string()));
  fs::remove_all(tmp);
}

TEST(OutputCheck, RemovesOnlyStaleTemporariesOfOurNaming) {
  const fs::path tmp = fs::temp_directory_path() / ("moebench_stale_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::string mine = "x.csv.tmp." + std::to_string(::getpid());  // a live writer: kept
  for (const std::string n : {"a.csv.tmp.999999999", "b.npy.tmp.999999998", "notes.txt.tmp.999999999", "c.csv", mine.c_str()})
    std::ofstream(tmp / n) << "x";
  EXPECT_EQ(remove_stale_temporaries(tmp.string()), 2);
  EXPECT_FALSE(fs::exists(tmp / "a.csv.tmp.999999999"));
  EXPECT_FALSE(fs::exists(tmp / "b.npy.tmp.999999998"));
  EXPECT_TRUE(fs::exists(tmp / "notes.txt.tmp.999999999"));
  EXPECT_TRUE(fs::exists(tmp / "c.csv"));
  EXPECT_TRUE(fs::exists(tmp / mine));
  fs::remove_all(tmp);
}

TEST(BytesOf, OverflowIsAnError) {
  EXPECT_EQ(bytes_of(10, DType::bf16), 20u);
  EXPECT_THROW(bytes_of(SIZE_MAX / 2, DType::f32), Error);
}

// The papers' specifications as the benches read them, against the documents' numbers.
TEST(PaperSpecs, MatchTheDocuments) {
  const ModelSpec& medium = model_spec("gpt3-medium");  // 000 Sec. 4.1
  EXPECT_EQ(medium.shape.layers, 24);
  EXPECT_EQ(medium.shape.hidden, 1024);
  EXPECT_EQ(medium.shape.heads, 16);
  EXPECT_EQ(medium.shape.seq, 2048);
  EXPECT_EQ(medium.shape.experts, 64);
  EXPECT_EQ(medium.shape.moe_every, 2);
  EXPECT_EQ(model_spec("gpt3-6.7b").shape.hidden, 4096);
  const ModelSpec& m6t = model_spec("m6t-3layer");  // 001 Table 3
  EXPECT_EQ(m6t.shape.hidden, 128);
  EXPECT_EQ(m6t.shape.ffn, 512);
  EXPECT_EQ(m6t.shape.experts, 4096);
  EXPECT_EQ(m6t.shape.vocab, 21128);  // 001 A.2
  EXPECT_EQ(m6t.shape.capacity_factor, 1.25);
  EXPECT_EQ(model_spec("m6t-1t").shape.ffn, 21248);
  EXPECT_EQ(model_spec("m6t-1t").shape.experts, 960);
  const MoELayerSpec& xl = moe_layer_spec("gpt-xl");  // 003 Table 3
  EXPECT_EQ(xl.hidden, 2048);
  EXPECT_EQ(xl.ffn, 8192);
  EXPECT_EQ(xl.experts, (std::vector<int>{64, 16}));
  try {
    model_spec("gpt-5");
    FAIL() << "an unknown spec was found";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpt3-medium"), std::string::npos) << e.what();
  }
}


TEST(RunProgress, FilterSelectsAsGoogleBenchmarkDoes) {
  const std::vector<std::string> names = {"moe_layer/local/iterations:3/repeats:5/manual_time",
                                          "moe_layer/ppmoe/iterations:3/repeats:5/manual_time",
                                          "comm/all_reduce/iterations:1/repeats:5/manual_time"};
  EXPECT_EQ(selected_count(names, ""), 3u);
  EXPECT_EQ(selected_count(names, "all"), 3u);
  EXPECT_EQ(selected_count(names, "moe_layer"), 2u);
  EXPECT_EQ(selected_count(names, "-moe_layer"), 1u);
  EXPECT_EQ(selected_count(names, "^comm|ppmoe"), 2u);
  EXPECT_EQ(selected_count(names, "(unclosed"), 0u);
}

TEST(RunProgress, EachCaseSaysHowFarTheRunIsAndWhatIsLeft) {
  RunProgress p(false);
  p.start(3, 5, 0, 0);
  const std::string first = p.case_done();
  EXPECT_EQ(first.rfind("[1/3, ", 0), 0u) << first;
  EXPECT_NE(first.find("left]"), std::string::npos) << first;
  p.case_done();
  const std::string last = p.case_done();
  EXPECT_EQ(last.rfind("[3/3, ", 0), 0u) << last;
  EXPECT_EQ(last.find("left"), std::string::npos) << last;
  // More cases than the filter count predicted (a name it did not foresee) never reads "4/3".
  EXPECT_EQ(p.case_done().rfind("[4/4, ", 0), 0u);
}

TEST(RunProgress, ASlowRepetitionGetsItsOwnLine) {
  RunProgress p(true, /*quiet_s=*/0);
  p.start(1, 2, std::uint64_t(3) << 30, double(std::uint64_t(8) << 30));
  testing::internal::CaptureStdout();
  p.repetition_done("case/one", 1, 2);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("case/one: repetition 1 of 2 done"), std::string::npos) << out;
  RunProgress quiet(true, /*quiet_s=*/3600);
  testing::internal::CaptureStdout();
  quiet.repetition_done("case/one", 1, 2);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
}

TEST(RunProgress, ARepetitionRunningLongIsNamedWhileItRuns) {
  testing::internal::CaptureStdout();
  {
    RunProgress p(true, /*quiet_s=*/0.2);
    p.start(1, 1, 0, 0);
    p.repetition_started("case/slow", 1, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    p.repetition_done("case/slow", 1, 1);
  }
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("case/slow: repetition 1 of 1 still running"), std::string::npos) << out;
}

}  // namespace moebench

namespace moebench {

// The MoE layer's phases are one rank's, the one whose phases add up to the most: rank 0 waits in
// the dispatch (5) while rank 1 computes its experts (4). Each phase's maximum (5, 4, 2) would add
// up to 11, above either rank's own 8 and 7.
TEST(LayerCasePhases, AreTheSlowestRanksNotEachPhasesMaximum) {
  const std::vector<double> rows = {5, 1, 2, 1, 4, 2};  // two ranks, three phases each
  EXPECT_EQ(largest_row(rows, 2), 0u);
  EXPECT_EQ(largest_row({1, 1, 1, 2, 2, 2, 0, 0, 0}, 3), 1u);
  EXPECT_EQ(largest_row({3, 4}, 1), 0u);
}

// Paired rounds add one iteration at a time: the merged result is as if the iterations had run
// in one run -- times and ranges in order (0 where a range was absent), means over all of them,
// peaks the largest.
TEST(RunResultAppend, MergesRoundsInTheOrderTheyRan) {
  RunResult a;
  a.ms = {10, 12};
  a.range_ms_each = {{"moe.expert", {4, 6}}};
  a.range_ms = {{"moe.expert", 5}};
  a.comm_union_ms = 2;
  a.peak[0] = 100;
  RunResult b;
  b.ms = {14};
  b.range_ms_each = {{"moe.expert", {8}}, {"moe.offload", {1}}};
  b.comm_union_ms = 5;
  b.peak[0] = 50;
  b.peak_total = 300;
  a.append(b);
  EXPECT_EQ(a.ms, (std::vector<double>{10, 12, 14}));
  EXPECT_EQ(a.range_ms_each["moe.expert"], (std::vector<double>{4, 6, 8}));
  EXPECT_EQ(a.range_ms_each["moe.offload"], (std::vector<double>{0, 0, 1}));
  EXPECT_DOUBLE_EQ(a.range_ms["moe.expert"], 6);
  EXPECT_DOUBLE_EQ(a.range_ms["moe.offload"], 1.0 / 3);
  EXPECT_DOUBLE_EQ(a.comm_union_ms, 3);
  EXPECT_EQ(a.peak[0], 100);
  EXPECT_EQ(a.peak_total, 300);
  RunResult empty;
  empty.append(a);
  EXPECT_EQ(empty.ms, a.ms);
  EXPECT_DOUBLE_EQ(empty.range_ms["moe.expert"], 6);
}

}  // namespace moebench
