// Shared by the dispatchers: the row map from (group, expert, position) to an expert-major
// row, built from per-(group, expert) base offsets computed on the host from kept counts.
#pragma once
#include <cstdint>
#include <vector>
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/host_staging.h"
#include "kernels/permute.h"
#include "moe/gate.h"

namespace moebench {

// Expert-major layout of the kept assignments of experts [first, first + count): expert by
// expert, group by group inside an expert, position order inside a group. base[g, e] = -1
// for experts outside the range. Returns rows per expert of the range.
std::vector<int> expert_major_bases(const Routing& r, int first, int count, std::vector<std::int32_t>& base);

class RowMapper {
 public:
  RowMapper(Device& dev, TrackingAllocator& alloc) : dev_(dev), alloc_(alloc), base_upload_(dev) {}
  // Builds row_of [T, S] on the device from host bases [G, E].
  void build(const Routing& r, const std::vector<std::int32_t>& base);
  RowMap map(int hidden) const { return RowMap{tokens_, slots_, hidden, row_of_.as<std::int32_t>()}; }

 private:
  Device& dev_;
  TrackingAllocator& alloc_;
  Buffer base_, row_of_;
  HostStaging base_upload_;
  int tokens_ = 0, slots_ = 1;
};

}  // namespace moebench
