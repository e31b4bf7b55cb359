// Parts of one micro-batch's routing, for a layer that pipelines the micro-batch (MPMoE,
// FasterMoE style). The gate routes the whole micro-batch once -- capacity, positions and the
// aux loss are the whole batch's, so a pipelined layer drops exactly the tokens the plain one
// drops -- and each part is a Routing the dispatchers take as it is:
//  - token_slice: tokens [t0, t1) (MPMoE splits on the batch dimension). The kept assignments
//    are renumbered inside the slice in the gate's priority order (choice, then token), so the
//    slice's rows are expert-major in the same order as the whole batch's; its counts are its own.
//  - expert_slice: the assignments to experts [e0, e1) only (one step of FasterMoE's exchange
//    by worker groups). Positions stay; every other slot is -1 and the routing is marked
//    expert_slice, so the dispatcher adds its outputs into what the other slices wrote.
// The host copy of the per-slot experts and positions is taken once per micro-batch.
#pragma once
#include <cstdint>
#include <vector>
#include "moe/gate.h"
#include "runtime/host_staging.h"

namespace moebench {

struct RoutingOnHost {
  std::vector<std::int32_t> expert, position;  // [T, S]
};
RoutingOnHost routing_on_host(const Device& dev, const Routing& r, const Stream& s);

// Throws Error if the routing has more than one capacity group or the range is empty or out of
// [0, T].
Routing token_slice(const Device& dev, TrackingAllocator& alloc, HostStaging& upload, const Routing& whole,
                    const RoutingOnHost& host, int t0, int t1, const Stream& s);
Routing expert_slice(const Device& dev, TrackingAllocator& alloc, HostStaging& upload, const Routing& whole,
                     const RoutingOnHost& host, int e0, int e1, const Stream& s);

}  // namespace moebench
