// Graphs on CPU streams (runtime/stream_graph.h): nothing runs while capturing; a replay runs
// every op once, each on its own stream, as concurrently as the streams ran it eagerly and
// ordered by fresh events each time; what CUDA refuses in a capture is refused here too; and
// the buffers a capture allocates stay the graph's, so a replay cannot overwrite anyone else's;
// what changes from step to step (AdamW's count) is read on the device when a replay runs.
// Sleeps, not computation, make the timing claims.
#include <gtest/gtest.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>
#include "runtime/adamw.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/range.h"
#include "runtime/stream_graph.h"
#include "runtime/timeline.h"
#include "timeline_util.h"
#include "wall_clock_util.h"

namespace moebench {
namespace {

using Clock = std::chrono::steady_clock;
using testing_util::seconds_since;
void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

class StreamGraphTest : public ::testing::Test {
 protected:
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc{Backend::cpu};
  Stream a = dev.create_stream("a"), b = dev.create_stream("b");
};

TEST_F(StreamGraphTest, NothingRunsWhileCapturingAndEachReplayRunsEveryOpOnce) {
  std::atomic<int> runs{0};
  StreamGraph graph(alloc, a, [&] {
    run_on(a, "count", [&runs] { ++runs; });
    run_on(a, "count", [&runs] { ++runs; });
  });
  a.synchronize();
  EXPECT_EQ(runs, 0) << "a capture ran its work";
  EXPECT_EQ(graph.nodes(), 2u);
  for (int k = 1; k <= 3; ++k) {
    graph.replay(a);
    a.synchronize();
    EXPECT_EQ(runs, 2 * k);
  }
}

// A fork and a join: the side stream's branch runs on its own stream, beside the origin's, in
// every replay (two 200 ms sleeps take about 200 ms, not 400); one stream replaying both
// branches would serialise them.
TEST_F(StreamGraphTest, AForkedStreamRunsItsBranchOnItsOwnStreamBesideTheOrigin) {
  StreamGraph graph(alloc, a, [&] {
    Event fork(Backend::cpu), join(Backend::cpu);
    fork.record(a);
    fork.make_wait(b);  // b joins the capture
    run_on(a, "sleep", [] { sleep_ms(200); });
    run_on(b, "sleep", [] { sleep_ms(200); });
    join.record(b);
    join.make_wait(a);
  });
  for (int k = 0; k < 2; ++k) {
    testing_util::RecordedTimeline timeline;
    const auto t0 = Clock::now();
    graph.replay(a);
    a.synchronize();
    const double took = seconds_since(t0);
    EXPECT_LT(took, 0.35) << "the branches did not overlap";
    EXPECT_GE(took, 0.2);
    std::vector<int> tracks;
    for (const TimelineEntry& e : timeline.entries())
      if (e.name == "sleep") tracks.push_back(e.track);
    std::sort(tracks.begin(), tracks.end());
    EXPECT_EQ(tracks, (std::vector<int>{a.id, b.id})) << "each branch on its own stream";
  }
}

// Each replay orders its branches by events of its own: the side stream reads what this
// replay's origin wrote, never waiting only for an earlier replay's.
TEST_F(StreamGraphTest, EveryReplayOrdersItsStreamsByItsOwnEvents) {
  std::atomic<int> written{0};
  std::vector<int> seen;
  StreamGraph graph(alloc, a, [&] {
    run_on(a, "write", [&written] {
      sleep_ms(50);
      ++written;
    });
    Event produced(Backend::cpu), consumed(Backend::cpu);
    produced.record(a);
    produced.make_wait(b);
    run_on(b, "read", [&written, &seen] { seen.push_back(written); });
    consumed.record(b);
    consumed.make_wait(a);
  });
  for (int k = 0; k < 4; ++k) graph.replay(a);
  a.synchronize();
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4}));
}

TEST_F(StreamGraphTest, TheHostCannotWaitInsideACapture) {
  EXPECT_THROW(StreamGraph(alloc, a, [&] { a.synchronize(); }), Error);
  EXPECT_THROW(StreamGraph(alloc, a, [&] {
                 Event e(Backend::cpu);
                 e.record(a);
                 e.synchronize();
               }),
               Error);
  EXPECT_THROW(StreamGraph(alloc, a, [&] {
                 Event e(Backend::cpu);
                 e.record(a);
                 (void)e.query();
               }),
               Error);
  // The failed captures were abandoned: the stream runs its work again.
  int ran = 0;
  run_on(a, "after", [&ran] { ran = 1; });
  a.synchronize();
  EXPECT_EQ(ran, 1);
}

TEST_F(StreamGraphTest, WorkOnTheDefaultStreamInsideACaptureIsRefused) {
  try {
    StreamGraph graph(alloc, a, [&] { run_on(dev.default_stream(), "inline", [] {}); });
    ADD_FAILURE() << "an op on the default stream ran inside a capture";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("default stream"), std::string::npos) << e.what();
  }
  // A kernel's op, given its Exec of the default stream, is refused the same way.
  EXPECT_THROW(StreamGraph(alloc, a, [&] { run_host(dev.exec(dev.default_stream()), "kernel", [] {}); }), Error);
  EXPECT_THROW(StreamGraph(alloc, dev.default_stream(), [] {}), Error);
  // Outside a capture the default stream runs its work at once, as before.
  int ran = 0;
  run_on(dev.default_stream(), "inline", [&ran] { ran = 1; });
  EXPECT_EQ(ran, 1);
}

// An op may time extra runs of itself (a GEMM's algorithms) only outside a capture: inside one
// they would be captured into the graph.
TEST_F(StreamGraphTest, AnOpRunsNoTrialsInsideACapture) {
  const Exec ex = dev.exec(a);
  ASSERT_NE(ex.trials_allowed, nullptr);
  EXPECT_TRUE(ex.trials_allowed());
  bool inside = true;
  StreamGraph graph(alloc, a, [&] {
    inside = ex.trials_allowed();
    run_on(a, "op", [] {});
  });
  EXPECT_FALSE(inside);
  EXPECT_TRUE(ex.trials_allowed());
}

// A breakdown range inside a capture times nothing (its events would be points in the graph,
// which no host may read): traced replays show their ops, and reading the trace does not fail.
TEST_F(StreamGraphTest, RangesInsideACaptureTimeNothing) {
  testing_util::RecordedTimeline timeline;
  Breakdown breakdown;
  StreamGraph graph(alloc, a, [&] {
    ScopedRange r("moe.expert", a, &breakdown);
    run_on(a, "op", [] {});
  });
  graph.replay(a);
  a.synchronize();
  EXPECT_TRUE(breakdown.totals_ms().empty());
  int ops = 0, ranges = 0;
  for (const TimelineEntry& e : timeline.entries()) (e.range ? ranges : ops) += e.name == "op" || e.name == "moe.expert";
  EXPECT_EQ(ops, 1);
  EXPECT_EQ(ranges, 0);
}

// AdamW's step count lives on the device: a captured step replayed three times after one eager
// step updates as four eager steps do (bias corrections of steps 2, 3, 4, not 2, 2, 2). Its first
// step, which makes the count, cannot be captured.
TEST_F(StreamGraphTest, AdamWStepsReplayedCountTheirOwnSteps) {
  std::vector<float> w = {0.5f, -3.f}, want = w, m(2, 0.f), v(2, 0.f);
  const std::vector<float> g = {0.25f, 1.f};
  AdamStep hyper;
  AdamW adam(hyper, dev, alloc);
  adam.add(w.data(), 2, DType::f32, a);
  EXPECT_THROW(StreamGraph(alloc, a, [&] { adam.next_step(a); }), Error);
  auto step = [&] {
    adam.next_step(a);
    adam.update(0, g.data(), a);
  };
  step();
  StreamGraph graph(alloc, a, step);
  for (int k = 0; k < 3; ++k) graph.replay(a);
  a.synchronize();
  for (int t = 1; t <= 4; ++t) {
    AdamStep h = hyper;
    h.step = t;
    adam_step_cpu(2, h, want.data(), m.data(), v.data(), g.data());
  }
  EXPECT_EQ(w, want);
}

TEST_F(StreamGraphTest, AnEventRecordedBeforeTheCaptureCannotBeWaitedForInIt) {
  Event before(Backend::cpu);
  before.record(b);
  EXPECT_THROW(StreamGraph(alloc, a, [&] { before.make_wait(a); }), Error);
}

TEST_F(StreamGraphTest, AForkNotJoinedBackIsNamed) {
  try {
    StreamGraph graph(alloc, a, [&] {
      Event fork(Backend::cpu);
      fork.record(a);
      fork.make_wait(b);
      run_on(b, "left behind", [] {});
    });
    ADD_FAILURE() << "a capture ended with a stream not joined back";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stream(s) b "), std::string::npos) << e.what();
  }
  // b left the failed capture too.
  int ran = 0;
  run_on(b, "after", [&ran] { ran = 1; });
  b.synchronize();
  EXPECT_EQ(ran, 1);
}

TEST_F(StreamGraphTest, AGraphIsNotReplayedInsideAnotherCapture) {
  StreamGraph inner(alloc, a, [&] { run_on(a, "op", [] {}); });
  EXPECT_THROW(StreamGraph(alloc, b, [&] { inner.replay(b); }), Error);
}

// A buffer the capture allocated and freed is the graph's: the pool does not hand its block to
// work outside the graph, so a replay cannot overwrite it. Within the capture the block is
// reused at once; after the graph goes it returns to the pool.
TEST_F(StreamGraphTest, BuffersACaptureAllocatedStayTheGraphs) {
  static constexpr std::size_t n = 1000;
  Buffer out = alloc.allocate(n * 4, MemTag::buffers, a);
  {
    Buffer early = alloc.allocate(n * 4, MemTag::temporary, a);  // a block the pool holds before the capture
  }
  void* first = nullptr;
  void* second = nullptr;
  auto graph = std::make_unique<StreamGraph>(alloc, a, [&] {
    Buffer scratch = alloc.allocate(n * 4, MemTag::temporary, a);
    first = scratch.data();
    run_on(a, "fill", [p = scratch.as<float>()] { std::fill(p, p + n, 7.f); });
    run_on(a, "copy", [p = scratch.as<float>(), q = out.as<float>()] { std::copy(p, p + n, q); });
    scratch.release();
    Buffer again = alloc.allocate(n * 4, MemTag::temporary, a);
    second = again.data();
  });
  EXPECT_EQ(first, second) << "a block the capture freed is reused within it, in stream order";
  Buffer mine = alloc.allocate(n * 4, MemTag::temporary, a);
  EXPECT_NE(mine.data(), first) << "the graph's block was handed to work outside the graph";
  run_on(a, "fill", [p = mine.as<float>()] { std::fill(p, p + n, 3.f); });
  graph->replay(a);
  a.synchronize();
  EXPECT_EQ(out.as<float>()[n - 1], 7.f);
  EXPECT_EQ(mine.as<float>()[0], 3.f) << "a replay overwrote a buffer outside the graph";
  mine.release();
  graph.reset();
  Buffer after = alloc.allocate(n * 4, MemTag::temporary, a), after2 = alloc.allocate(n * 4, MemTag::temporary, a);
  EXPECT_TRUE(after.data() == first || after2.data() == first) << "the graph's block did not return to the pool";
}

}  // namespace
}  // namespace moebench
