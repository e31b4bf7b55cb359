#include "moe/moe_layer.h"

namespace moebench {

MoELayer::MoELayer(const MoEConfig& cfg, Device& dev, TrackingAllocator& alloc,
                   std::unique_ptr<TokenDispatcher> dispatcher)
    : cfg_(cfg), dev_(dev), alloc_(alloc), dispatcher_(std::move(dispatcher)), gate_(cfg_, dev, alloc),
      experts_(cfg_, dev, alloc, dispatcher_->first_local_expert(), dispatcher_->local_experts()) {}

void MoELayer::init(std::uint64_t seed, const Stream& s) {
  gate_.init(seed, s);
  experts_.init(seed, s);
}

void MoELayer::zero_grad(const Stream& s) {
  dev_.fill_zero(gate_.grad().data(), gate_.grad().bytes(), s);
  experts_.zero_grad(s);
}

MoEContext MoELayer::forward(const void* x, int tokens, void* y, const Stream& s, Breakdown* b) {
  MoEContext c;
  c.x = x;
  c.tokens = tokens;
  {
    ScopedRange r("moe.gating", s, b);
    c.routing = gate_.forward(x, tokens, dispatcher_->capacity_groups(tokens), s, dispatcher_->reads_host_counts());
  }
  {
    ScopedRange r("moe.dispatch", s, b);
    c.dispatch = dispatcher_->dispatch(c.routing, x, s);
  }
  {
    ScopedRange r("moe.expert", s, b);
    c.expert_out = alloc_.allocate(c.dispatch->rows.bytes(), MemTag::activations, s);
    const DispatchState& d = *c.dispatch;
    c.experts = d.expert_offset ? experts_.forward(d.rows.data(), d.expert_offset.as<std::int32_t>(), d.row_bound,
                                                   c.expert_out.data(), s)
                                : experts_.forward(d.rows.data(), d.rows_per_expert, c.expert_out.data(), s, d.padded);
  }
  {
    ScopedRange r("moe.combine", s, b);
    dispatcher_->combine(*c.dispatch, c.routing, c.expert_out, y, s);
  }
  return c;
}

void MoELayer::read_counts(MoEContext& c, const Stream& s) {
  gate_.read_counts(c.routing, s);
  experts_.read_rows(c.experts, s);
}

LoadStats MoELayer::load(const MoEContext& c, int experts) {
  if (!c.routing.counts_on_host)
    throw Error("MoELayer::load: this step's counts are still on the device (--expert-gemm segmented); read_counts first");
  return load_stats(c.routing.routed, c.routing.kept, experts);
}

void MoELayer::backward(MoEContext& c, const void* dy, void* dx, const Stream& s, Breakdown* b) {
  const int T = c.routing.tokens();
  Buffer dweight = alloc_.allocate(std::size_t(T) * c.routing.slots() * 4, MemTag::temporary, s);
  {
    ScopedRange r("moe.combine.bwd", s, b);
    dispatcher_->combine_backward(*c.dispatch, c.routing, dy, dweight.as<float>(), s);
  }
  Buffer d_rows;
  {
    ScopedRange r("moe.expert.bwd", s, b);
    d_rows = alloc_.allocate(c.dispatch->d_expert_out.bytes(), MemTag::temporary, s);
    experts_.backward(c.experts, c.dispatch->d_expert_out.data(), d_rows.data(), s);
  }
  {
    ScopedRange r("moe.dispatch.bwd", s, b);
    dispatcher_->dispatch_backward(*c.dispatch, c.routing, d_rows, dx, s);
  }
  finish_layer_backward(gate_, *dispatcher_, c.routing, c.x, dweight.as<float>(), dx, dev_, alloc_, s, b);
}

}  // namespace moebench
