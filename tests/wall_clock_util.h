// Wall-clock time in the tests that time a mechanism: streams that overlap, a watchdog that fires.
#pragma once
#include <chrono>

namespace moebench::testing_util {
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace moebench::testing_util
