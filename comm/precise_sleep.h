// Sleeping until a point in time without waking a scheduler tick late: the emulated link's
// operations end when the link is done, not a wake-up later (on a virtual machine a sleeping
// thread wakes 30-55 us late even with 1 ns of timer slack, a small message's whole time on a
// fast link). The thread sleeps until its usual lateness before the end and yields the core for
// the rest.
#pragma once
#include <chrono>
#include <vector>

namespace moebench {

// The wake-up lateness a thread plans with: the median of the measured overshoots, at most
// kMaxWakeUpLateness, so a measurement taken on a busy machine cannot turn every wait into a
// long spin.
inline constexpr std::chrono::microseconds kMaxWakeUpLateness{200};
std::chrono::steady_clock::duration planned_lateness(std::vector<std::chrono::steady_clock::duration> overshoots);

// This thread's planned lateness, measured once per thread (nine 50 us sleeps).
std::chrono::steady_clock::duration wake_up_lateness();

// Returns at `t` or just after it, never before.
void sleep_until_precisely(std::chrono::steady_clock::time_point t);

}  // namespace moebench
