#include "moe/moe_layer.h"

namespace moebench {

MoELayer::MoELayer(const MoEConfig& cfg, Device& dev, TrackingAllocator& alloc,
                   std::unique_ptr<TokenDispatcher> dispatcher)
    : cfg_(cfg), dev_(dev), alloc_(alloc), dispatcher_(std::move(dispatcher)), gate_(cfg_, dev, alloc),
      experts_(cfg_, dev, alloc, dispatcher_->first_local_expert(), dispatcher_->local_experts()) {}

void MoELayer::init(std::uint64_t seed) {
  gate_.init(seed);
  experts_.init(seed);
}

void MoELayer::forward(const void* x, int tokens, void* y, Breakdown* b) {
  const Stream& s = dev_.default_stream();
  x_ = x;
  {
    ScopedRange r("moe.gating", s, b);
    gate_.forward(x, tokens, dispatcher_->capacity_groups(tokens), routing_);
  }
  {
    ScopedRange r("moe.dispatch", s, b);
    dispatcher_->dispatch(routing_, x, rows_, rows_per_expert_);
  }
  {
    ScopedRange r("moe.expert", s, b);
    alloc_.reserve(expert_out_, rows_.bytes(), MemTag::activations);
    experts_.forward(rows_.data(), rows_per_expert_, expert_out_.data());
  }
  {
    ScopedRange r("moe.combine", s, b);
    dispatcher_->combine(routing_, expert_out_, y);
  }
}

void MoELayer::backward(const void* dy, void* dx, Breakdown* b) {
  const Stream& s = dev_.default_stream();
  const int T = routing_.tokens();
  alloc_.reserve(dweight_, std::size_t(T) * routing_.slots() * 4, MemTag::temporary);
  {
    ScopedRange r("moe.combine.bwd", s, b);
    dispatcher_->combine_backward(routing_, dy, expert_out_, d_expert_out_, dweight_.as<float>());
  }
  {
    ScopedRange r("moe.expert.bwd", s, b);
    alloc_.reserve(d_rows_, d_expert_out_.bytes(), MemTag::temporary);
    experts_.backward(d_expert_out_.data(), d_rows_.data());
  }
  {
    ScopedRange r("moe.dispatch.bwd", s, b);
    dispatcher_->dispatch_backward(routing_, d_rows_, dx);
  }
  {
    ScopedRange r("moe.gating.bwd", s, b);
    gate_.backward(routing_, x_, dweight_.as<float>(), dx, dispatcher_->aux_grad_scale());
  }
  {
    ScopedRange r("moe.sync.bwd", s, b);
    dispatcher_->sync_gradients(dx, std::size_t(T) * cfg_.hidden, gate_.grad().as<float>(),
                                std::size_t(cfg_.hidden) * cfg_.experts);
  }
}

}  // namespace moebench
