#include "harness/layer_runner.h"
#include <algorithm>
#include "runtime/host_copy.h"
#include "moe/init.h"

namespace moebench {

double RunResult::median_ms() const {
  if (ms.empty()) return 0;
  std::vector<double> v = ms;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

void RunResult::append(const RunResult& later) {
  const std::size_t before = ms.size(), added = later.ms.size(), total = before + added;
  if (total == 0) return;
  ms.insert(ms.end(), later.ms.begin(), later.ms.end());
  for (const auto& named : later.range_ms_each) range_ms_each.try_emplace(named.first);
  for (auto& [name, each] : range_ms_each) {
    each.resize(before, 0.0);
    auto it = later.range_ms_each.find(name);
    if (it != later.range_ms_each.end()) each.insert(each.end(), it->second.begin(), it->second.end());
    each.resize(total, 0.0);
    double sum = 0;
    for (double x : each) sum += x;
    range_ms[name] = sum / double(total);
  }
  auto weighted = [&](double mine, double theirs) { return (mine * double(before) + theirs * double(added)) / double(total); };
  comm_union_ms = weighted(comm_union_ms, later.comm_union_ms);
  other_ms = weighted(other_ms, later.other_ms);
  for (int t = 0; t < kMemTagCount; ++t) {
    peak[t] = std::max(peak[t], later.peak[t]);
    local_peak[t] = std::max(local_peak[t], later.local_peak[t]);
  }
  peak_total = std::max(peak_total, later.peak_total);
  pinned_peak = std::max(pinned_peak, later.pinned_peak);
  reserved = std::max(reserved, later.reserved);
  rows = std::max(rows, later.rows);
  sent_rows = std::max(sent_rows, later.sent_rows);
  local_rows = later.local_rows;
  local_sent_rows = later.local_sent_rows;
}

const std::vector<std::string>& kind_ranges(const std::string& kind) {
  static const std::map<std::string, std::vector<std::string>> ranges = {
      {"S", {"moe.a2a.dispatch", "moe.a2a.dispatch.bwd", "moe.a2a.redispatch"}},
      {"C", {"moe.expert", "moe.expert.bwd", "moe.recompute"}},
      {"R", {"moe.a2a.combine", "moe.a2a.combine.bwd"}},
      {"M", {"moe.offload", "moe.restore"}}};
  return ranges.at(kind);
}

double RunResult::busy_ms(const std::string& kind) const {
  double total = 0;
  for (const auto& name : kind_ranges(kind))
    if (auto it = range_ms.find(name); it != range_ms.end()) total += it->second;
  return total;
}

std::vector<double> RunResult::ranges_each_ms(const std::vector<std::string>& names) const {
  std::vector<double> each(ms.size(), 0.0);
  for (const auto& name : names)
    if (auto it = range_ms_each.find(name); it != range_ms_each.end())
      for (std::size_t i = 0; i < each.size() && i < it->second.size(); ++i) each[i] += it->second[i];
  return each;
}

LayerRunner::LayerRunner(const MeasureEnv& env, const LayerShape& shape, int tokens, const PipelineStreams& streams,
                         Communicator& dispatch_comm, Communicator& combine_comm, std::optional<AdamStep> adam)
    : env_(env), shape_(shape), tokens_(tokens), alloc_(env.device.backend(), env.device.default_stream()),
      streams_(streams), dispatch_comm_(dispatch_comm) {
  const MoEConfig& c = shape.moe;
  layer_ = std::make_unique<PipelinedMoELayer>(c, PipelineConfig{}, env.device, alloc_, dispatch_comm, combine_comm);
  layer_->init(1234, streams_.compute);
  const std::size_t n = std::size_t(tokens) * c.hidden, first = std::size_t(env.world.rank()) * n;
  x_ = device_from_f32(env.device, alloc_, normal_vector(n, 1234, 77, 1.f, first), c.dtype, MemTag::activations);
  dy_ = device_from_f32(env.device, alloc_, normal_vector(n, 1234, 78, 1e-3f, first), c.dtype, MemTag::temporary);
  y_ = alloc_.allocate(n * dtype_size(c.dtype), MemTag::activations);
  dx_ = alloc_.allocate(n * dtype_size(c.dtype), MemTag::temporary);
  if (adam) {
    adam_ = std::make_unique<AdamW>(*adam, env.device, alloc_);
    const Stream& s = env.device.default_stream();
    for (auto [weight, t] : {std::pair{&layer_->gate().weight(), DType::f32}, std::pair{&layer_->experts().w1(), c.dtype},
                             std::pair{&layer_->experts().w2(), c.dtype}})
      adam_->add(weight->data(), weight->bytes() / dtype_size(t), t, s);
  }
  env.device.synchronize();
}

LayerRunner::~LayerRunner() { env_.device.synchronize(); }

void LayerRunner::step(const PipelineStreams& st, Breakdown* b, double* rows, double* sent) {
  PipelinedContext c = layer_->forward(x_.data(), tokens_, y_.data(), st, b);
  if (rows) {
    *rows = 0;
    *sent = 0;
    for (const auto& p : c.parts) {
      for (int r : p.dispatch->rows_per_expert) *rows += r;
      for (int k : p.routing.kept) *sent += k;
    }
  }
  layer_->backward(c, dy_.data(), dx_.data(), st, b);
}

RunResult LayerRunner::run(const PipelineConfig& pipe, bool sequential, int warmup, int iterations) {
  layer_->set_pipeline(pipe);
  const Stream& cs = streams_.compute;
  const PipelineStreams st = sequential ? PipelineStreams{cs, cs, cs, cs} : streams_;
  for (int i = 0; i < warmup; ++i) step(st, nullptr, nullptr, nullptr);
  env_.device.synchronize();
  alloc_.reset_peaks();
  RunResult r;
  std::map<std::string, double> sums;
  double rows = 0, sent = 0, comm_union = 0, other = 0;
  for (int i = 0; i < iterations; ++i) {
    layer_->zero_grad(cs);
    Breakdown b;
    Event start(env_.device.backend(), EventUse::timing), stop(env_.device.backend(), EventUse::timing);
    r.ms.push_back(slowest_rank_ms(env_.rt, env_.device, cs, [&] {
      start.record(cs);
      step(st, &b, &rows, &sent);
      stop.record(cs);
    }));
    const auto totals = b.totals_ms();
    double busy = 0;
    for (const auto& [name, ms] : totals) {
      const double slowest = env_.rt.max(ms);
      sums[name] += slowest;
      r.range_ms_each[name].resize(i, 0.0);  // a range absent from earlier iterations took 0 there
      r.range_ms_each[name].push_back(slowest);
      for (const std::string k : {"S", "C", "R", "M"})  // lvalues: kind_ranges returns into its own table
        for (const auto& n : kind_ranges(k))
          if (n == name) busy += ms;
    }
    std::vector<std::string> comm;
    for (const std::string k : {"S", "R"})
      for (const auto& n : kind_ranges(k)) comm.push_back(n);
    comm_union += env_.rt.max(b.union_ms(comm));
    other += env_.rt.max(Event::elapsed_ms(start, stop) - busy);
    if (adam_) {  // AdamW on every parameter, outside the layer's time
      adam_->next_step(cs);
      const Buffer* grads[3] = {&layer_->gate().grad(), &layer_->experts().w1_grad(), &layer_->experts().w2_grad()};
      for (std::size_t k = 0; k < 3; ++k) adam_->update(k, grads[k]->data(), cs);
      env_.device.synchronize();
    }
  }
  for (const auto& [name, total] : sums) r.range_ms[name] = total / iterations;
  for (auto& [name, each] : r.range_ms_each) each.resize(iterations, 0.0);
  r.comm_union_ms = comm_union / iterations;
  r.other_ms = std::max(0.0, other / iterations);
  for (int t = 0; t < kMemTagCount; ++t) r.peak[t] = env_.rt.max(double(alloc_.peak(static_cast<MemTag>(t))));
  r.peak_total = env_.rt.max(double(alloc_.peak_total()));
  r.pinned_peak = env_.rt.max(double(alloc_.pinned_peak()));
  r.reserved = env_.rt.max(double(alloc_.reserved_bytes()));
  r.rows = env_.rt.max(rows);
  r.sent_rows = env_.rt.max(sent);
  r.local_rows = rows;
  r.local_sent_rows = sent;
  for (int t = 0; t < kMemTagCount; ++t) r.local_peak[t] = double(alloc_.peak(static_cast<MemTag>(t)));
  return r;
}

std::vector<RunResult> LayerRunner::run_paired(const std::vector<PairedConfig>& configs, int warmup, int rounds) {
  const Stream& cs = streams_.compute;
  for (const PairedConfig& c : configs) {
    if (c.warm) continue;
    layer_->set_pipeline(c.pipe);
    const PipelineStreams st = c.sequential ? PipelineStreams{cs, cs, cs, cs} : streams_;
    for (int i = 0; i < warmup; ++i) step(st, nullptr, nullptr, nullptr);
  }
  std::vector<RunResult> out(configs.size());
  const std::size_t k = configs.size();
  for (int round = 0; round < rounds; ++round)
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t i = (j + std::size_t(round)) % k;
      out[i].append(run(configs[i].pipe, configs[i].sequential, 0, 1));
    }
  return out;
}

double LayerRunner::profile(const PipelineConfig& pipe) {
  return run(pipe, false, 1, 3).median_ms();
}

}  // namespace moebench
