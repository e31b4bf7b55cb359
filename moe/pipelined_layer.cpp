#include "moe/pipelined_layer.h"

namespace moebench {

const char* reuse_name(MemoryReuse r) {
  switch (r) {
    case MemoryReuse::none: return "none";
    case MemoryReuse::s1: return "S1";
    case MemoryReuse::s2: return "S2";
    case MemoryReuse::s3: return "S3";
    case MemoryReuse::s4: return "S4";
  }
  return "?";
}

std::optional<MemoryReuse> parse_reuse(const std::string& name) {
  for (MemoryReuse r : {MemoryReuse::none, MemoryReuse::s1, MemoryReuse::s2, MemoryReuse::s3, MemoryReuse::s4})
    if (name == reuse_name(r)) return r;
  return std::nullopt;
}

std::optional<std::string> PipelineConfig::validate(int tokens, int world) const {
  auto s = [](auto v) { return std::to_string(v); };
  if (split == PipelineSplit::tokens) {
    if (partitions < 1 || partitions > tokens)
      return "--partitions: " + s(partitions) + " is not between 1 and the " + s(tokens) +
             " tokens per rank (every part needs a token)";
    return std::nullopt;
  }
  if (group_size < 1 || world % group_size != 0)
    return "--group-size: " + s(group_size) + " does not divide the " + s(world) + " ranks; allowed: a divisor of " +
           s(world);
  if (reuse != MemoryReuse::none)
    return std::string("--strategy: ") + reuse_name(reuse) +
           " is MPMoE's memory reuse (--split tokens); the FasterMoE-style split runs without it (none)";
  return std::nullopt;
}

std::string PipelineConfig::describe() const {
  if (split == PipelineSplit::worker_groups) return "FasterMoE-style g=" + std::to_string(group_size);
  if (reuse == MemoryReuse::none)
    return partitions == 1 ? "FastMoE-style" : "PMoE n=" + std::to_string(partitions);
  return "MPMoE n=" + std::to_string(partitions) + " " + reuse_name(reuse);
}

std::vector<int> token_split(int tokens, int parts) {
  std::vector<int> first(std::size_t(parts) + 1, 0);
  for (int i = 0; i < parts; ++i) first[i + 1] = first[i] + tokens / parts + (i < tokens % parts ? 1 : 0);
  return first;
}

static MoEConfig pipelined(MoEConfig c) {
  // Partitions route token slices and expert slices of one routing; the paper gate's dense
  // tensors describe whole routings only.
  if (c.gate == GateImpl::paper) throw Error("--gate paper: the pipelined (MPMoE) layer takes the fused gate only");
  c.keep_expert_activation = false;  // T_M is GeLU's input alone, in every mode
  return c;
}

PipelinedMoELayer::PipelinedMoELayer(const MoEConfig& cfg, const PipelineConfig& pipe, Device& dev,
                                     TrackingAllocator& alloc, Communicator& dispatch_comm,
                                     Communicator& combine_comm)
    : cfg_(pipelined(cfg)), pipe_(pipe), dev_(dev), alloc_(alloc), comm_(dispatch_comm),
      dispatcher_(make_expert_parallel_dispatcher(DispatcherEnv{cfg_, dev, alloc}, dispatch_comm, &combine_comm)),
      gate_(cfg_, dev, alloc),
      experts_(cfg_, dev, alloc, dispatcher_->first_local_expert(), dispatcher_->local_experts()),
      upload_(dev) {}

void PipelinedMoELayer::init(std::uint64_t seed, const Stream& s) {
  gate_.init(seed, s);
  experts_.init(seed, s);
}

void PipelinedMoELayer::zero_grad(const Stream& s) {
  dev_.fill_zero(gate_.grad().data(), gate_.grad().bytes(), s);
  experts_.zero_grad(s);
}

const void* PipelinedMoELayer::rows_in(const Part& p, const void* base) const {
  return static_cast<const char*>(base) + std::size_t(p.t0) * cfg_.hidden * dtype_size(cfg_.dtype);
}
void* PipelinedMoELayer::rows_in(const Part& p, void* base) const {
  return static_cast<char*>(base) + std::size_t(p.t0) * cfg_.hidden * dtype_size(cfg_.dtype);
}

void PipelinedMoELayer::slice(PipelinedContext& c, const Stream& s) {
  const RoutingOnHost host = routing_on_host(dev_, c.routing, s);
  if (pipe_.split == PipelineSplit::tokens) {
    const std::vector<int> first = token_split(c.tokens, pipe_.partitions);
    for (int i = 0; i < pipe_.partitions; ++i) {
      Part& p = c.parts.emplace_back();
      p.t0 = first[i];
      p.t1 = first[i + 1];
      p.routing = token_slice(dev_, alloc_, upload_, c.routing, host, p.t0, p.t1, s);
    }
    return;
  }
  // Step k: the experts of group (mine + k) mod m; every part covers all tokens.
  const int g = pipe_.group_size, m = comm_.size() / g, mine = comm_.rank() / g;
  const int per_group = g * dispatcher_->local_experts();
  for (int k = 0; k < m; ++k) {
    Part& p = c.parts.emplace_back();
    p.t0 = 0;
    p.t1 = c.tokens;
    const int target = (mine + k) % m;
    p.routing = expert_slice(dev_, alloc_, upload_, c.routing, host, target * per_group, (target + 1) * per_group, s);
  }
}

void PipelinedMoELayer::offload(Buffer& src, Buffer& host, const PipelineStreams& st, Breakdown* b) {
  Event ready(dev_.backend());
  ready.record(st.compute);
  ready.make_wait(st.copy);
  host = alloc_.allocate_pinned(src.bytes(), MemTag::activations, st.copy);
  src.record_stream(st.copy);
  ScopedRange r("moe.offload", st.copy, b);
  dev_.copy(host.data(), src.data(), src.bytes(), st.copy);
}

// A device buffer of `host`'s bytes filled from it on the copy stream, for the compute stream.
static Buffer prefetch(Device& dev, TrackingAllocator& alloc, Buffer& host, const PipelineStreams& st) {
  Buffer out = alloc.allocate(host.bytes(), MemTag::activations, st.copy);
  dev.copy(out.data(), host.data(), host.bytes(), st.copy);
  out.record_stream(st.compute);
  host.release();
  return out;
}

void PipelinedMoELayer::restore_begin(const PipelinedContext& c, Part& p, const PipelineStreams& st, Breakdown* b) {
  const MemoryReuse reuse = pipe_.reuse;
  if (offloads_rows(reuse) || offloads_middle(reuse)) {
    {
      ScopedRange r("moe.restore", st.copy, b);
      if (offloads_rows(reuse)) p.dispatch->rows = prefetch(dev_, alloc_, p.host_rows, st);
      if (offloads_middle(reuse)) p.experts.h = prefetch(dev_, alloc_, p.host_middle, st);
    }
    p.prefetched = std::make_shared<Event>(dev_.backend());
    p.prefetched->record(st.copy);
  }
  if (!offloads_rows(reuse)) {  // S2, S4: the dispatch once more, from T_I
    {
      ScopedRange r("moe.dispatch.bwd", st.compute, b);
      p.redispatch = dispatcher_->redispatch_prepare(*p.dispatch, rows_in(p, c.x), st.compute);
    }
    p.redispatch->begin(st.dispatch);
    ScopedRange r("moe.a2a.redispatch", st.dispatch, b);
    dispatcher_->redispatch_exchange(*p.redispatch, st.dispatch);
  }
}

void PipelinedMoELayer::restore_end(Part& p, const PipelineStreams& st, Breakdown* b) {
  const Stream& cs = st.compute;
  if (p.prefetched) p.prefetched->make_wait(cs);
  if (p.redispatch) {
    p.redispatch->begin(cs);
    ScopedRange r("moe.dispatch.bwd", cs, b);
    dispatcher_->redispatch_finish(*p.redispatch, cs);
    p.dispatch->rows = std::move(p.redispatch->rows);
    p.redispatch.reset();
  }
  p.experts.x = p.dispatch->rows.data();
  if (pipe_.reuse == MemoryReuse::s3 || pipe_.reuse == MemoryReuse::s4) {
    ScopedRange r("moe.recompute", cs, b);
    experts_.compute_middle(p.experts, cs);
  }
}

// Later work on `to` waits for what is queued on each of `from` now.
static void join(Backend backend, const Stream& to, std::initializer_list<const Stream*> from) {
  for (const Stream* s : from) {
    Event e(backend);
    e.record(*s);
    e.make_wait(to);
  }
}

// The side streams start after what the compute stream has queued.
static void start_after(Backend backend, const PipelineStreams& st) {
  for (const Stream* s : {&st.dispatch, &st.combine, &st.copy}) join(backend, *s, {&st.compute});
}

PipelinedContext PipelinedMoELayer::forward(const void* x, int tokens, void* y, const PipelineStreams& st,
                                            Breakdown* b) {
  const Stream& cs = st.compute;
  const MemoryReuse reuse = pipe_.reuse;
  const bool sharing = reuse != MemoryReuse::none;
  const std::size_t row_bytes = std::size_t(cfg_.hidden) * dtype_size(cfg_.dtype);
  PipelinedContext c;
  c.x = x;
  c.tokens = tokens;
  {
    ScopedRange r("moe.gating", cs, b);
    c.routing = gate_.forward(x, tokens, dispatcher_->capacity_groups(tokens), cs);
  }
  {
    ScopedRange r("moe.dispatch", cs, b);
    slice(c, cs);
    if (pipe_.split == PipelineSplit::worker_groups) dev_.fill_zero(y, std::size_t(tokens) * row_bytes, cs);
  }
  start_after(dev_.backend(), st);
  const int n = int(c.parts.size());
  auto prepare = [&](Part& p) {
    ScopedRange r("moe.dispatch", cs, b);
    p.dispatch = dispatcher_->dispatch_prepare(p.routing, rows_in(p, x), cs);
  };
  auto exchange = [&](Part& p) {  // S; the host waits here for the part's counts
    p.dispatch->begin(st.dispatch);
    ScopedRange r("moe.a2a.dispatch", st.dispatch, b);
    dispatcher_->dispatch_exchange(*p.dispatch, st.dispatch);
  };
  auto combine_finish = [&](Part& p) {
    p.dispatch->begin(cs);
    ScopedRange r("moe.combine", cs, b);
    dispatcher_->combine_finish(*p.dispatch, cs);
  };
  prepare(c.parts[0]);
  exchange(c.parts[0]);
  for (int i = 0; i < n; ++i) {
    Part& p = c.parts[i];
    // Shared buffers: a part gives its T_DI and T_DO back when the part two later takes its
    // turn, its T_M when the next one does (the pool hands the block on in stream order).
    if (sharing && i >= 2) {
      c.parts[i - 2].dispatch->rows.release();
      c.parts[i - 2].expert_out.release();
    }
    if (sharing && i >= 1) c.parts[i - 1].experts.h.release();
    p.dispatch->begin(cs);
    {
      ScopedRange r("moe.dispatch", cs, b);
      dispatcher_->dispatch_finish(*p.dispatch, cs);
    }
    if (offloads_rows(reuse)) offload(p.dispatch->rows, p.host_rows, st, b);
    if (i + 1 < n) prepare(c.parts[i + 1]);  // before C(i) on the compute stream: S(i+1) may overlap it
    p.expert_out = alloc_.allocate(std::max<std::size_t>(p.dispatch->rows.bytes(), 1), MemTag::activations, cs);
    {
      ScopedRange r("moe.expert", cs, b);
      p.experts = experts_.forward(p.dispatch->rows.data(), p.dispatch->rows_per_expert, p.expert_out.data(), cs,
                                   p.dispatch->padded);
    }
    if (offloads_middle(reuse)) offload(p.experts.h, p.host_middle, st, b);
    {
      ScopedRange r("moe.combine", cs, b);
      dispatcher_->combine_prepare(*p.dispatch, p.routing, p.expert_out, rows_in(p, y), cs);
    }
    {
      p.dispatch->begin(st.combine);
      ScopedRange r("moe.a2a.combine", st.combine, b);
      dispatcher_->combine_exchange(*p.dispatch, st.combine);
    }
    if (i + 1 < n) exchange(c.parts[i + 1]);  // S(i+1) after R(i): they alternate
    if (i > 0) combine_finish(c.parts[i - 1]);
  }
  combine_finish(c.parts[n - 1]);
  if (sharing)  // backward brings every part's T_DI and T_M back
    for (Part& p : c.parts) {
      p.dispatch->rows.release();
      p.experts.h.release();
      p.experts.x = nullptr;
      p.expert_out.release();
    }
  join(dev_.backend(), cs, {&st.dispatch, &st.combine, &st.copy});
  return c;
}

void PipelinedMoELayer::backward(PipelinedContext& c, const void* dy, void* dx, const PipelineStreams& st,
                                 Breakdown* b) {
  const Stream& cs = st.compute;
  const bool sharing = pipe_.reuse != MemoryReuse::none;
  const bool slices = pipe_.split == PipelineSplit::worker_groups;
  const int T = c.routing.tokens(), S = c.routing.slots(), n = int(c.parts.size());
  start_after(dev_.backend(), st);
  Buffer dweight = alloc_.allocate(std::size_t(T) * S * 4, MemTag::temporary, cs);
  if (slices) {  // the steps add into them
    dev_.fill_zero(dweight.data(), dweight.bytes(), cs);
    dev_.fill_zero(dx, std::size_t(T) * cfg_.hidden * dtype_size(cfg_.dtype), cs);
  }
  auto combine_backward = [&](Part& p) {  // local, then R on the combine stream
    {
      ScopedRange r("moe.combine.bwd", cs, b);
      dispatcher_->combine_backward_prepare(*p.dispatch, p.routing, rows_in(p, dy),
                                            dweight.as<float>() + std::size_t(p.t0) * S, cs);
    }
    p.dispatch->begin(st.combine);
    ScopedRange r("moe.a2a.combine.bwd", st.combine, b);
    dispatcher_->combine_backward_exchange(*p.dispatch, st.combine);
  };
  auto dispatch_finish = [&](Part& p) {
    p.dispatch->begin(cs);
    ScopedRange r("moe.dispatch.bwd", cs, b);
    dispatcher_->dispatch_backward_finish(*p.dispatch, cs);
  };
  combine_backward(c.parts[0]);
  if (sharing) restore_begin(c, c.parts[0], st, b);
  for (int i = 0; i < n; ++i) {
    Part& p = c.parts[i];
    if (i + 1 < n) {  // part i+1's communication and copies overlap part i's experts
      combine_backward(c.parts[i + 1]);
      if (sharing) restore_begin(c, c.parts[i + 1], st, b);
    }
    p.dispatch->begin(cs);
    {
      ScopedRange r("moe.combine.bwd", cs, b);
      dispatcher_->combine_backward_finish(*p.dispatch, cs);
    }
    if (sharing) restore_end(p, st, b);
    Buffer d_rows = alloc_.allocate(p.dispatch->d_expert_out.bytes(), MemTag::temporary, cs);
    {
      ScopedRange r("moe.expert.bwd", cs, b);
      experts_.backward(p.experts, p.dispatch->d_expert_out.data(), d_rows.data(), cs, sharing ? nullptr : &p.grad_h);
    }
    if (sharing) {
      p.dispatch->rows.release();
      p.experts.h.release();
      p.dispatch->d_expert_out.release();
    }
    {
      ScopedRange r("moe.dispatch.bwd", cs, b);
      dispatcher_->dispatch_backward_prepare(*p.dispatch, p.routing, d_rows, rows_in(p, dx), cs);
    }
    if (!sharing) p.grad_rows = std::move(d_rows);
    d_rows.release();
    {
      p.dispatch->begin(st.dispatch);
      ScopedRange r("moe.a2a.dispatch.bwd", st.dispatch, b);
      dispatcher_->dispatch_backward_exchange(*p.dispatch, st.dispatch);
    }
    if (i > 0) dispatch_finish(c.parts[i - 1]);
  }
  dispatch_finish(c.parts[n - 1]);
  finish_layer_backward(gate_, *dispatcher_, c.routing, c.x, dweight.as<float>(), dx, dev_, alloc_, cs, b);
  join(dev_.backend(), cs, {&st.dispatch, &st.combine, &st.copy});
  c.parts.clear();  // the micro-batch's buffers back to the pool, in stream order
}

}  // namespace moebench
