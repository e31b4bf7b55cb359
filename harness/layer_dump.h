// The state of one MoE layer after a forward + backward as .npy files, <base><tensor>.npy: its
// input and output with their gradients, the gate's and the experts' weights and gradients, and
// the routing, all in fp32 (indices in int32), so that another framework can recompute the
// layer independently (tests/cli/check_dump.py).
#pragma once
#include <string>
#include "moe/moe_layer.h"

namespace moebench {

struct LayerIO {
  const void* x;   // [tokens, hidden] in the layer's type, as are the others
  const void* y;
  const void* dy;
  const void* dx;
};

// `step`: its counts and aux loss read (MoELayer::read_counts).
void dump_layer_state(const std::string& base, Device& dev, TrackingAllocator& alloc, MoELayer& layer,
                      const MoEContext& step, const LayerIO& io);

}  // namespace moebench
