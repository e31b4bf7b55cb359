// A breakdown's ranges against the roofline (models/roofline.h): a phase the model counts gets
// its FLOPs, least bytes and floor at the profile's rates; a parent whose children are counted
// gets their sums (they run one after another). These fill the six work columns of a breakdown
// CSV (kRangeWorkColumns), beside the range's time.
#pragma once
#include <map>
#include <string>
#include <vector>
#include "harness/range_tree.h"
#include "models/roofline.h"

namespace moebench {

struct CountedRange {
  Work work;
  double floor_ms = 0;  // 0 without a profile of this device
  std::string bound;
};

inline const std::vector<std::string> kRangeWorkColumns = {"flops",    "achieved_tflops", "min_bytes",
                                                           "floor_ms", "floor_bound",     "time_over_floor"};

// Per range path, its counted work: `phase_work` by the range's name.
std::map<std::string, CountedRange> count_range_work(const std::vector<RangeRow>& rows,
                                                     const std::map<std::string, Work>& phase_work,
                                                     const RooflineProfile& profile, bool half_precision);

// The six work cells of range `r`, or why it has none.
std::vector<std::string> range_work_cells(const RangeRow& r, const std::map<std::string, CountedRange>& counted,
                                          const RooflineProfile& profile);

}  // namespace moebench
