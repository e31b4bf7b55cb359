// The watchdog ends the process when an operation outlives --comm-timeout, naming it, within
// the timeout plus a margin of seconds (not a multiple of the timeout); operations that finish
// in time are left alone; every one of its 64 slots is watched, and an operation started while
// all are taken runs unwatched instead of blocking, and is counted.
#include <gtest/gtest.h>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>
#include "runtime/watchdog.h"
#include "wall_clock_util.h"

namespace moebench {
namespace {

using Clock = std::chrono::steady_clock;

// What the tests allow past the timeout: the watcher's poll (50 ms) and a loaded machine's
// scheduling delay. A watchdog that fires at a multiple of a 1 s timeout is outside it.
constexpr double kMarginSeconds = 0.5;

using testing_util::seconds_since;

TEST(WatchdogDeathTest, FiresWithinItsTimeoutPlusAMargin) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto t0 = Clock::now();
  // The message says when it fired: 1.00 .. 1.49 s after the operation began.
  EXPECT_EXIT(
      {
        Watchdog::set_identity("moebench_test", 3);
        Watchdog::set_timeout(1.0);
        Watchdog::Scope op("all_to_all (mpi)");
        std::this_thread::sleep_for(std::chrono::seconds(20));
      },
      ::testing::ExitedWithCode(1),
      "moebench_test: rank 3: error: all_to_all \\(mpi\\) did not complete within 1 s \\(--comm-timeout; ended after "
      "1\\.[0-4][0-9] s\\)");
  // Seen from outside too (the child's start-up included): well before a multiple of the timeout.
  EXPECT_LT(seconds_since(t0), 1.0 + 4 * kMarginSeconds) << "the watchdog fired late";
}

TEST(WatchdogDeathTest, OperationsThatFinishInTimeAreLeftAlone) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog::set_timeout(0.3);
        for (int i = 0; i < 5; ++i) {
          Watchdog::Scope op("short");
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));  // nothing in flight: no timeout
        std::_Exit(Watchdog::watched() == 0 ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
}

// The last of the 64 slots is watched as the first: 63 operations fill slots 0..62 and end,
// the one in slot 63 outlives its timeout.
TEST(WatchdogDeathTest, TheLastSlotIsWatched) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog::set_timeout(1.0);
        std::vector<std::unique_ptr<Watchdog::Scope>> first;
        for (int i = 0; i + 1 < Watchdog::kSlots; ++i) first.push_back(std::make_unique<Watchdog::Scope>("short"));
        Watchdog::Scope last("the operation in the last slot");
        if (Watchdog::watched() != Watchdog::kSlots) std::_Exit(3);
        first.clear();
        std::this_thread::sleep_for(std::chrono::seconds(20));
      },
      ::testing::ExitedWithCode(1), "error: the operation in the last slot did not complete within 1 s");
}

TEST(Watchdog, AnOperationPastTheSlotsRunsUnwatchedAndIsCounted) {
  Watchdog::set_timeout(300);
  const int before = Watchdog::watched();
  const std::int64_t unwatched = Watchdog::unwatched();
  std::vector<std::unique_ptr<Watchdog::Scope>> held;
  for (int i = before; i < Watchdog::kSlots; ++i) held.push_back(std::make_unique<Watchdog::Scope>("held"));
  ASSERT_EQ(Watchdog::watched(), Watchdog::kSlots) << "fewer operations were watched than the watchdog has slots";
  const auto t0 = Clock::now();
  {
    Watchdog::Scope extra("one too many");
    EXPECT_EQ(Watchdog::watched(), Watchdog::kSlots);
    EXPECT_EQ(Watchdog::unwatched(), unwatched + 1);
  }
  EXPECT_LT(seconds_since(t0), 1.0) << "a full watchdog held the operation up";
  held.clear();
  EXPECT_EQ(Watchdog::watched(), before) << "slots were not given back";
  Watchdog::Scope again("after the others");
  EXPECT_EQ(Watchdog::watched(), before + 1) << "a freed slot was not taken again";
  EXPECT_EQ(Watchdog::unwatched(), unwatched + 1);
}

}  // namespace
}  // namespace moebench
