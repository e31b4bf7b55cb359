// The emulated link's sleep (comm/precise_sleep.h): the lateness a thread plans with is the
// median of its measured overshoots, never more than the cap (a measurement on a busy machine
// must not turn every wait into a long spin), never negative; a precise sleep never ends early.
#include <gtest/gtest.h>
#include <chrono>
#include "comm/precise_sleep.h"

namespace moebench {
namespace {

using std::chrono::microseconds;
using Clock = std::chrono::steady_clock;

TEST(PreciseSleep, PlannedLatenessIsTheMedianOvershootUpToTheCap) {
  EXPECT_EQ(planned_lateness({}), Clock::duration::zero());
  EXPECT_EQ(planned_lateness({microseconds(40), microseconds(10), microseconds(35)}), microseconds(35));
  EXPECT_EQ(planned_lateness({microseconds(-5), microseconds(-7), microseconds(1)}), Clock::duration::zero());
  // A busy machine: every sleep a second late. The plan stops at the cap.
  const std::vector<Clock::duration> busy(9, std::chrono::seconds(1));
  EXPECT_EQ(planned_lateness(busy), Clock::duration(kMaxWakeUpLateness));
  EXPECT_EQ(kMaxWakeUpLateness, microseconds(200));
  // The cap does not pull a plan below it up to it.
  EXPECT_EQ(planned_lateness({microseconds(150)}), microseconds(150));
}

TEST(PreciseSleep, NeverEndsBeforeItsTime) {
  EXPECT_LE(wake_up_lateness(), Clock::duration(kMaxWakeUpLateness));
  for (int i = 0; i < 20; ++i) {
    const auto t = Clock::now() + microseconds(200 + 50 * i);
    sleep_until_precisely(t);
    EXPECT_GE(Clock::now(), t);
  }
}

}  // namespace
}  // namespace moebench
