// The paper gate's dispatch and combine (M6-T Fig. 7, GShard): einsums over the dense [T, E, C]
// dispatch mask and combine tensor, each a GEMM per capacity group --
//   dispatch 'TEC,TM->ECM': padded[E C, h] = dispatch^T x,    combine 'TEC,ECM->TM': y = combine padded,
// and their backward (d padded = combine^T dy, d combine = dy padded^T, dx = dispatch d padded) --
// O(T E C h) each, where index dispatch is O(T S h). The capacity-padded rows [G, E, C] map onto
// the dispatcher's expert-major rows (kept assignments only; the empty slots are dropped), so
// the exchange and the experts see the same rows as with the fused gate. fp32 only.
#pragma once
#include <cstdint>
#include <vector>
#include "moe/gate.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/host_staging.h"

namespace moebench {

struct OneHotMap {
  CapacityShape shape;
  Buffer padded_row_of;  // [G, E, C] int32: the expert-major row of a padded slot, or -1
  // the routing's tensors (device data; the routing outlives every dispatch state)
  const float* combine = nullptr;
  const float* dispatch = nullptr;
  const std::int32_t* expert = nullptr;
  const std::int32_t* position = nullptr;
  const float* weight = nullptr;
};

// From the routing's tensors and the dispatcher's host bases [G, E] (-1: not on this rank).
OneHotMap build_one_hot_map(TrackingAllocator& alloc, HostStaging& upload, const Routing& r,
                            const std::vector<std::int32_t>& base, const Stream& s);

// rows [R, h] = the kept rows of dispatch^T x
void one_hot_dispatch(Device& dev, TrackingAllocator& alloc, const OneHotMap& m, int hidden, const float* x, float* rows,
                      const Stream& s);
// y (+)= combine padded(rows)
void one_hot_combine(Device& dev, TrackingAllocator& alloc, const OneHotMap& m, int hidden, const float* rows, float* y,
                     bool accumulate, const Stream& s);
// drows = the kept rows of combine^T dy; dweight [T, S] from d combine = dy padded(rows)^T
void one_hot_combine_backward(Device& dev, TrackingAllocator& alloc, const OneHotMap& m, int hidden, const float* dy,
                              const float* rows, float* drows, float* dweight, const Stream& s);
// dx (+)= dispatch padded(drows)
void one_hot_dispatch_backward(Device& dev, TrackingAllocator& alloc, const OneHotMap& m, int hidden,
                               const float* drows, float* dx, bool accumulate, const Stream& s);

}  // namespace moebench
