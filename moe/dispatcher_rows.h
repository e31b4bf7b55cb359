// Shared by the dispatchers: the row map from (group, expert, position) to an expert-major
// row, built from per-(group, expert) base offsets computed on the host from kept counts.
#pragma once
#include <cstdint>
#include <vector>
#include "kernels/permute.h"
#include "moe/gate.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/host_staging.h"

namespace moebench {

// Expert-major layout of the kept assignments of experts [first, first + count): expert by
// expert, group by group inside an expert, position order inside a group. base[g, e] = -1
// for experts outside the range. Returns rows per expert of the range.
std::vector<int> expert_major_bases(const Routing& r, int first, int count, std::vector<std::int32_t>& base);

// One micro-batch's row of each (token, slot) on this rank, or -1.
struct RowMapping {
  Buffer base, row_of;  // [G, E] and [T, S] int32 on the device
  int tokens = 0, slots = 1;
  RowMap map(int hidden) const { return RowMap{tokens, slots, hidden, row_of.as<std::int32_t>()}; }
};

// Builds it on the device from host bases [G, E], on `s`.
RowMapping build_row_mapping(Device& dev, TrackingAllocator& alloc, HostStaging& upload, const Routing& r,
                             const std::vector<std::int32_t>& base, const Stream& s);

}  // namespace moebench
