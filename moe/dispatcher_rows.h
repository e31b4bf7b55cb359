// Shared by the dispatchers: the row map from (group, expert, position) to an expert-major
// row, built from per-(group, expert) base offsets computed on the host from kept counts, and
// the four moves between token order and those rows in the routing's form: index kernels
// (kernels/permute.h) for the fused gate, the paper gate's dense one-hot einsums
// (moe/one_hot_dispatch.h) when the routing carries its tensors.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>
#include "kernels/permute.h"
#include "moe/gate.h"
#include "moe/one_hot_dispatch.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/host_staging.h"

namespace moebench {

// Expert-major layout of the kept assignments of experts [first, first + count): expert by
// expert, group by group inside an expert, position order inside a group. base[g, e] = -1
// for experts outside the range. Returns rows per expert of the range.
std::vector<int> expert_major_bases(const Routing& r, int first, int count, std::vector<std::int32_t>& base);
// The same order in the padded route's layout (--expert-gemm padded, kernels/pad_rows.h): blocks of
// padded_block_rows() rows, expert l's at row l * padded or, too busy for one, in the overflow.
// Returns rows per expert; *padded gets the block height.
std::vector<int> padded_expert_bases(const Routing& r, int first, int count, const PaddedBlockCost& cost,
                                     std::vector<std::int32_t>& base, int* padded);

// One micro-batch's row of each (token, slot) on this rank, or -1.
struct RowMapping {
  Buffer base, row_of;  // [G, E] and [T, S] int32 on the device
  int tokens = 0, slots = 1;
  std::optional<OneHotMap> one_hot;  // the paper gate's routing
  RowMap map(int hidden) const { return RowMap{tokens, slots, hidden, row_of.as<std::int32_t>()}; }
};

// Builds it on the device from host bases [G, E], on `s`.
RowMapping build_row_mapping(Device& dev, TrackingAllocator& alloc, HostStaging& upload, const Routing& r,
                             const std::vector<std::int32_t>& base, const Stream& s);
// The same layout from the kept counts on the device (kernels/segment_offsets.h): nothing is read
// on the host. `offset` gets each local expert's first row and the end ([count + 1], on the
// device). Not for the paper gate's one-hot routing, whose maps are built on the host.
RowMapping build_row_mapping_on_device(Device& dev, TrackingAllocator& alloc, const Routing& r, int first, int count,
                                       Buffer& offset, const Stream& s);

// The moves, as kernels/permute.h's dispatch_rows .. dispatch_rows_backward, on `s`.
void move_dispatch(Device& dev, TrackingAllocator& alloc, const RowMapping& m, int hidden, DType t, const void* x,
                   void* rows, const Stream& s);
void move_combine(Device& dev, TrackingAllocator& alloc, const RowMapping& m, int hidden, DType t, const void* rows,
                  const float* weight, void* y, bool accumulate, const Stream& s);
void move_combine_backward(Device& dev, TrackingAllocator& alloc, const RowMapping& m, int hidden, DType t,
                           const void* dy, const void* rows, const float* weight, void* drows, float* dweight,
                           bool slice, const Stream& s);
void move_dispatch_backward(Device& dev, TrackingAllocator& alloc, const RowMapping& m, int hidden, DType t,
                            const void* drows, void* dx, bool accumulate, const Stream& s);

}  // namespace moebench
