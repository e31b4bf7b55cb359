#include "comm/precise_sleep.h"
#include <algorithm>
#include <thread>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace moebench {

using Clock = std::chrono::steady_clock;

Clock::duration planned_lateness(std::vector<Clock::duration> overshoots) {
  if (overshoots.empty()) return Clock::duration::zero();
  std::nth_element(overshoots.begin(), overshoots.begin() + overshoots.size() / 2, overshoots.end());
  const Clock::duration median = std::max(overshoots[overshoots.size() / 2], Clock::duration::zero());
  return std::min<Clock::duration>(median, kMaxWakeUpLateness);
}

Clock::duration wake_up_lateness() {
  thread_local const Clock::duration lateness = [] {
    std::vector<Clock::duration> late(9);
    for (auto& l : late) {
      const auto target = Clock::now() + std::chrono::microseconds(50);
      std::this_thread::sleep_until(target);
      l = Clock::now() - target;
    }
    return planned_lateness(std::move(late));
  }();
  return lateness;
}

void sleep_until_precisely(Clock::time_point t) {
#if defined(__linux__)
  thread_local const bool precise = ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
  (void)precise;
#endif
  const auto early = t - wake_up_lateness();
  if (Clock::now() < early) std::this_thread::sleep_until(early);
  while (Clock::now() < t) std::this_thread::yield();
}

}  // namespace moebench
