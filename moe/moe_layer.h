// One MoE layer: gate -> dispatch -> experts -> combine, forward and backward, each step
// inside a breakdown range (NVTX name = CSV column): moe.gating, moe.dispatch, moe.expert,
// moe.combine, and moe.combine.bwd, moe.expert.bwd, moe.dispatch.bwd, moe.gating.bwd,
// moe.sync.bwd. The output carries no residual: a dropped token's output is 0 here and the
// caller's residual connection passes it through (M6-T Sec. 3.1).
#pragma once
#include <memory>
#include "runtime/range.h"
#include "moe/dispatcher.h"
#include "moe/experts.h"
#include "moe/gate.h"

namespace moebench {

class MoELayer {
 public:
  MoELayer(const MoEConfig& cfg, Device& dev, TrackingAllocator& alloc, std::unique_ptr<TokenDispatcher> dispatcher);
  void init(std::uint64_t seed);

  // x, y: [tokens, h] in cfg.dtype on the layer's device. x must stay alive until backward.
  void forward(const void* x, int tokens, void* y, Breakdown* breakdown = nullptr);
  // dy -> dx [tokens, h]; gate, w1 and w2 gradients land in gate().grad() and experts().
  void backward(const void* dy, void* dx, Breakdown* breakdown = nullptr);

  const MoEConfig& config() const { return cfg_; }
  Gate& gate() { return gate_; }
  Experts& experts() { return experts_; }
  TokenDispatcher& dispatcher() { return *dispatcher_; }
  const Routing& routing() const { return routing_; }
  LoadStats load() const { return load_stats(routing_.routed, routing_.kept, cfg_.experts); }

 private:
  MoEConfig cfg_;
  Device& dev_;
  TrackingAllocator& alloc_;
  std::unique_ptr<TokenDispatcher> dispatcher_;
  Gate gate_;
  Experts experts_;
  Routing routing_;
  Buffer rows_, expert_out_, d_expert_out_, d_rows_, dweight_;
  std::vector<int> rows_per_expert_;
  const void* x_ = nullptr;
};

}  // namespace moebench
