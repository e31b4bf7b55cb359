// One MoE layer: gate -> dispatch -> experts -> combine, forward and backward, each step
// inside a breakdown range (NVTX name = CSV column): moe.gating, moe.dispatch, moe.expert,
// moe.combine, and moe.combine.bwd, moe.expert.bwd, moe.dispatch.bwd, moe.gating.bwd,
// moe.sync.bwd (the input gradient) and moe.gate_sync.bwd (the gate weights'). The output
// carries no residual: a dropped token's output is 0 here and the caller's residual connection
// passes it through (M6-T Sec. 3.1). The layer keeps weights and
// their gradients only: forward returns the micro-batch's context (routing, dispatcher state,
// saved activations) and backward consumes it, so any number of micro-batches may be in flight,
// their backwards in any order. Weight gradients accumulate over backwards (zero_grad clears).
#pragma once
#include <memory>
#include "moe/dispatcher.h"
#include "moe/experts.h"
#include "moe/gate.h"
#include "runtime/range.h"

namespace moebench {

// One micro-batch in the layer, from forward to backward.
struct MoEContext {
  const void* x = nullptr;  // the input, alive until backward
  int tokens = 0;
  Routing routing;
  std::unique_ptr<DispatchState> dispatch;
  ExpertsContext experts;
  Buffer expert_out;        // [R, h]
};

class MoELayer {
 public:
  MoELayer(const MoEConfig& cfg, Device& dev, TrackingAllocator& alloc, std::unique_ptr<TokenDispatcher> dispatcher);
  void init(std::uint64_t seed, const Stream& s);

  // x, y: [tokens, h] in cfg.dtype on the layer's device; everything runs on `s`.
  MoEContext forward(const void* x, int tokens, void* y, const Stream& s, Breakdown* breakdown = nullptr);
  // dy -> dx [tokens, h]; adds the gate, w1 and w2 gradients of this micro-batch into
  // gate().grad() and experts(). `c` is spent.
  void backward(MoEContext& c, const void* dy, void* dx, const Stream& s, Breakdown* breakdown = nullptr);
  void zero_grad(const Stream& s);

  const MoEConfig& config() const { return cfg_; }
  Gate& gate() { return gate_; }
  Experts& experts() { return experts_; }
  TokenDispatcher& dispatcher() { return *dispatcher_; }
  // The host's copies of a step's counts (the gate's, and the experts' rows where they stayed on
  // the device): waits for the stream, so a measured step does it after its timing.
  void read_counts(MoEContext& c, const Stream& s);
  static LoadStats load(const MoEContext& c, int experts);  // after read_counts
  LoadStats load(const MoEContext& c) const { return load(c, cfg_.experts); }

 private:
  MoEConfig cfg_;
  Device& dev_;
  TrackingAllocator& alloc_;
  std::unique_ptr<TokenDispatcher> dispatcher_;
  Gate gate_;
  Experts experts_;
};

}  // namespace moebench
