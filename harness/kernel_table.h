// The kernel log (runtime/kernel_log.h) of several runs of the same work, such as training steps,
// summarised per range path and kernel: its ops per run, the median milliseconds per run with
// their range, and its share of a run's time on the device. A kernel absent from a run counts
// 0 ms there.
#pragma once
#include <string>
#include <vector>
#include "harness/spread.h"
#include "runtime/kernel_log.h"

namespace moebench {

struct KernelRow {
  std::string path;   // the range it ran under; kOutsideRanges when none
  std::string name;   // the kernel
  double calls = 0;   // per run (mean)
  Spread ms;          // per run
  double share = 0;   // its median over the median of the runs' totals
};

inline constexpr const char* kOutsideRanges = "(outside ranges)";

// The slowest first; a run with no records is an Error (the log did not run).
std::vector<KernelRow> kernel_table(const std::vector<std::vector<KernelRecord>>& runs);

}  // namespace moebench
