// A nested breakdown (runtime/range.h) summarised over several runs of the same work, such as
// training steps: per path the milliseconds of one run as median and range and its share of the
// roots' time, and under every parent a row "<parent>/(other)" for what its children leave
// unattributed -- ops outside any child range and the gaps between them; negative where children
// on several streams overlap. In every run the rows directly under a parent add up to it; their
// medians do only about, but the sums of their minima and of their maxima bracket its range.
#pragma once
#include <string>
#include <vector>
#include "harness/spread.h"
#include "runtime/range.h"

namespace moebench {

struct RangeRow {
  std::string path, name;  // name: the path's last part ("(other)" for the unattributed rest)
  int depth = 0;           // 0: a root
  int calls = 0;           // ranges per run (0 for "(other)")
  Spread ms;               // per run
  double share = 0;        // the median over the roots' median
  bool other = false;
  bool leaf = true;        // no child ranges
};

inline constexpr const char* kOtherRange = "(other)";

// Depth-first, children in the order first opened. Every run must hold the same paths with the
// same range counts (the same work), else Error naming the first difference.
std::vector<RangeRow> range_tree(const std::vector<std::vector<Breakdown::PathTotal>>& runs);

}  // namespace moebench
