// CPU streams run concurrently: each is an in-order queue on its own worker thread; events
// order streams; a missing wait shows up as wrong data; a failed op is reported at the next
// synchronize. Sleeps, not computation, make the timing claims, so machine load cannot decide them.
#include <gtest/gtest.h>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>
#include "kernels/axpy.h"
#include "runtime/device.h"
#include "runtime/timeline.h"
#include "wall_clock_util.h"

namespace moebench {

using Clock = std::chrono::steady_clock;
using testing_util::seconds_since;
static void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(CpuStreams, WorkOnTwoStreamsOverlaps) {
  Device dev = Device::open(Backend::cpu);
  Stream a = dev.create_stream("a"), b = dev.create_stream("b");
  const auto t0 = Clock::now();
  run_on(a, "sleep", [] { sleep_ms(200); });
  run_on(b, "sleep", [] { sleep_ms(200); });
  EXPECT_LT(seconds_since(t0), 0.05) << "enqueueing must not wait for the work";
  dev.synchronize();
  EXPECT_LT(seconds_since(t0), 0.3);
}

TEST(CpuStreams, AnEventBetweenThemSerialisesTheStreams) {
  Device dev = Device::open(Backend::cpu);
  Stream a = dev.create_stream("a"), b = dev.create_stream("b");
  Event done_a(Backend::cpu);
  const auto t0 = Clock::now();
  run_on(a, "sleep", [] { sleep_ms(200); });
  done_a.record(a);
  done_a.make_wait(b);
  run_on(b, "sleep", [] { sleep_ms(200); });
  dev.synchronize();
  EXPECT_GT(seconds_since(t0), 0.4);
}

TEST(CpuStreams, EventsOrderWorkAcrossStreams) {
  Device dev = Device::open(Backend::cpu);
  Stream producer = dev.create_stream("producer"), consumer = dev.create_stream("consumer");
  std::vector<float> x(1000, 0.f), y(1000, 0.f);
  for (int round = 1; round <= 20; ++round) {
    Event written(Backend::cpu);
    run_on(producer, "write", [&x, round] {
      sleep_ms(1);
      std::fill(x.begin(), x.end(), float(round));
    });
    written.record(producer);
    written.make_wait(consumer);
    axpy(dev.exec(consumer), x.size(), 1.f, x.data(), y.data(), DType::f32);  // y += x, after the write
    Event read(Backend::cpu);
    read.record(consumer);
    read.make_wait(producer);  // the next write waits for this read
  }
  dev.synchronize();
  EXPECT_EQ(y[0], 210.f);  // 1 + 2 + ... + 20
  EXPECT_EQ(y[999], 210.f);
}

// Without the wait the consumer reads before the producer has written: the test that omits it
// must see the wrong value at least once, or these tests would prove nothing.
TEST(CpuStreams, AMissingWaitIsSeenAsWrongData) {
  Device dev = Device::open(Backend::cpu);
  Stream producer = dev.create_stream("producer"), consumer = dev.create_stream("consumer");
  int wrong = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::atomic<int> value{0};
    int seen = -1;
    run_on(producer, "write", [&value] {
      sleep_ms(5);
      value = 1;
    });
    run_on(consumer, "read", [&value, &seen] { seen = value; });  // no event: nothing orders it
    dev.synchronize();
    if (seen != 1) ++wrong;
  }
  EXPECT_GT(wrong, 0);
}

TEST(CpuStreams, EventTimesAreWhenTheStreamReachedThem) {
  Device dev = Device::open(Backend::cpu);
  Stream s = dev.create_stream("s");
  Event a(Backend::cpu, EventUse::timing), b(Backend::cpu, EventUse::timing);
  a.record(s);
  run_on(s, "sleep", [] { sleep_ms(50); });
  b.record(s);
  EXPECT_FALSE(b.query());  // the host did not wait: the stream is still sleeping
  const double ms = Event::elapsed_ms(a, b);
  EXPECT_GE(ms, 49.0);
  EXPECT_LT(ms, 150.0);
  EXPECT_TRUE(b.query());
}

// On CUDA an ordering event is made without timing (cudaEventDisableTiming), and the time between
// two of them is an invalid-handle error: the CPU refuses it as well, so a timer made of ordering
// events fails here, not only on a GPU.
TEST(CpuStreams, OnlyRecordedTimingEventsHaveATime) {
  Device dev = Device::open(Backend::cpu);
  Stream s = dev.create_stream("s");
  Event timed(Backend::cpu, EventUse::timing), ordering(Backend::cpu), never(Backend::cpu, EventUse::timing);
  EXPECT_EQ(ordering.use(), EventUse::ordering);
  timed.record(s);
  ordering.record(s);
  s.synchronize();
  auto refused = [](const std::function<void()>& f, const std::string& why) {
    try {
      f();
      ADD_FAILURE() << "no error; expected: " << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused([&] { Event::elapsed_ms(timed, ordering); }, "ordering event has no time (make it with EventUse::timing)");
  refused([&] { Event::elapsed_ms(ordering, timed); }, "Event::elapsed_ms (start): an ordering event");
  refused([&] { ordering.time_us(); }, "Event::time_us: an ordering event");
  refused([&] { Event::elapsed_ms(timed, never); }, "Event::elapsed_ms (stop): the event was never recorded");
  EXPECT_GE(timed.time_us(), 0.0);
  EXPECT_TRUE(ordering.query());
  Event moved = std::move(timed);
  EXPECT_EQ(moved.use(), EventUse::timing);
  EXPECT_EQ(Event::elapsed_ms(moved, moved), 0.0);
}

TEST(CpuStreams, AFailedOpIsReportedAtSynchronizeAndLaterOpsAreSkipped) {
  Device dev = Device::open(Backend::cpu);
  Stream s = dev.create_stream("worker");
  bool later_ran = false;
  run_on(s, "failing op", [] { throw Error("boom"); });
  run_on(s, "later op", [&later_ran] { later_ran = true; });
  try {
    s.synchronize();
    FAIL() << "the failure was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stream worker: failing op: boom"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(later_ran);
}

// The worker wakes host threads only where one waits (not after every op): two threads waiting
// for different points of one stream each return at their own point, the earlier one before the
// later op has run.
TEST(CpuStreams, WaitersForDifferentPointsEachReturnAtTheirOwn) {
  Device dev = Device::open(Backend::cpu);
  Stream s = dev.create_stream("s");
  std::atomic<bool> second_ran{false};
  const auto t0 = Clock::now();
  run_on(s, "first", [] { sleep_ms(150); });
  double early_s = 0;
  bool second_seen_early = true;
  std::thread early([&] {
    s.synchronize();  // waits for "first" only
    early_s = seconds_since(t0);
    second_seen_early = second_ran.load();
  });
  sleep_ms(30);  // the early waiter is waiting now
  run_on(s, "second", [&second_ran] {
    sleep_ms(150);
    second_ran = true;
  });
  s.synchronize();
  const double late_s = seconds_since(t0);
  early.join();
  EXPECT_TRUE(second_ran.load());
  EXPECT_FALSE(second_seen_early) << "the early waiter returned only after the later op";
  EXPECT_GE(early_s, 0.14);
  EXPECT_LT(early_s, late_s);
  EXPECT_GE(late_s, 0.29);
}

TEST(CpuStreams, CopiesToTheDeviceTakeTheirBytesAtTheCall) {
  Device dev = Device::open(Backend::cpu);
  Stream s = dev.create_stream("s");
  std::vector<float> dst(4, 0.f);
  {
    run_on(s, "sleep", [] { sleep_ms(20); });
    std::vector<float> src = {1, 2, 3, 4};
    dev.copy_to_device(dst.data(), src.data(), 16, s);
    src.assign(4, -1.f);  // reused before the queued copy runs
  }
  s.synchronize();
  EXPECT_EQ(dst, (std::vector<float>{1, 2, 3, 4}));
}

TEST(CpuStreams, TheDefaultStreamRunsInline) {
  Device dev = Device::open(Backend::cpu);
  int x = 0;
  run_on(dev.default_stream(), "inline", [&x] { x = 1; });
  EXPECT_EQ(x, 1);
  EXPECT_EQ(dev.default_stream().queue, nullptr);
}

}  // namespace moebench
