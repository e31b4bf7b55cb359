#include "harness/mpmoe_calibration.h"
#include <algorithm>
#include <array>
#include <chrono>
#include "runtime/side_by_side.h"

namespace moebench {

double Calibration::time(const std::string& op, double volume) const {
  return std::max(0.0, fits.at(op)(volume));
}

double ModelPrediction::busy_ms(const std::string& kind) const {
  return forward.busy_ms.at(kind) + backward.busy_ms.at(kind);
}

namespace {

// {median, fastest, slowest} of a figure's runs.
std::array<double, 3> median_min_max(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// The operations the fits and the slowdown factors are taken from, at a given size.
struct Ops {
  const MeasureEnv& ctx;
  LayerRunner& runner;
  const MoEConfig& c;
  std::size_t es;
  Buffer send, recv, rows_in, rows_out, grad_out, grad_in, host;
  std::vector<int> split;  // rows per local expert
  ExpertsContext experts;

  explicit Ops(LayerRunner& r) : ctx(r.env()), runner(r), c(r.layer().config()), es(dtype_size(c.dtype)) {}

  void size_rows(int rows) {
    TrackingAllocator& a = runner.allocator();
    const std::size_t bytes = std::size_t(std::max(rows, 1)) * c.hidden * es;
    a.reserve(rows_in, bytes, MemTag::temporary);
    a.reserve(rows_out, bytes, MemTag::temporary);
    a.reserve(grad_out, bytes, MemTag::temporary);
    a.reserve(grad_in, bytes, MemTag::temporary);
    ctx.device.fill_zero(rows_in.data(), bytes, ctx.device.default_stream());
    ctx.device.fill_zero(grad_out.data(), bytes, ctx.device.default_stream());
    const int L = runner.layer().experts().count();
    split.assign(L, rows / L);
    for (int l = 0; l < rows % L; ++l) ++split[l];
  }
  void size_comm(std::size_t bytes) {
    const std::size_t W = std::size_t(runner.dispatch_comm().size());
    const std::size_t per_peer = std::max<std::size_t>(bytes / W / es, 1) * es;
    runner.allocator().reserve(send, per_peer * W, MemTag::temporary);
    runner.allocator().reserve(recv, per_peer * W, MemTag::temporary);
  }
  void size_mem(std::size_t bytes) {
    if (!host || host.bytes() < bytes) host = runner.allocator().allocate_pinned(bytes, MemTag::temporary, runner.streams().copy);
    runner.allocator().reserve(grad_in, bytes, MemTag::temporary);
  }
  std::size_t mem_bytes = 0;

  void comm(int times) {
    const std::size_t count = send.bytes() / es / std::size_t(runner.dispatch_comm().size());
    for (int i = 0; i < times; ++i)
      runner.dispatch_comm().all_to_all(send.data(), recv.data(), count, c.dtype, runner.streams().dispatch);
  }
  void comp_fwd(int times) {
    for (int i = 0; i < times; ++i)
      experts = runner.layer().experts().forward(rows_in.data(), split, rows_out.data(), runner.streams().compute);
  }
  void comp_bwd(int times) {
    for (int i = 0; i < times; ++i)
      runner.layer().experts().backward(experts, grad_out.data(), grad_in.data(), runner.streams().compute);
  }
  void comp_middle(int times) {
    for (int i = 0; i < times; ++i) runner.layer().experts().compute_middle(experts, runner.streams().compute);
  }
  void mem(int times) {
    for (int i = 0; i < times; ++i) ctx.device.copy(host.data(), grad_in.data(), mem_bytes, runner.streams().copy);
  }
};

}  // namespace

Calibration calibrate(LayerRunner& runner, int repeats) {
  const auto start = std::chrono::steady_clock::now();
  const MeasureEnv& ctx = runner.env();
  Calibration cal;
  const MoEConfig& c = runner.layer().config();
  const std::size_t es = dtype_size(c.dtype);
  Ops ops(runner);
  SideBySide sbs;
  sbs.streams = {runner.streams().dispatch, runner.streams().compute, runner.streams().copy};
  sbs.launch = {[&](int t) { ops.comm(t); }, [&](int t) { ops.comp_fwd(t); }, [&](int t) { ops.mem(t); }};
  sbs.drain = [&] { runner.dispatch_comm().wait(runner.streams().dispatch); };
  // An op alone, `repeats` times: {median, fastest, slowest}.
  auto timed_runs = [&](const std::function<void(int)>& op, const Stream& s) {
    op(1);  // warm
    ctx.device.synchronize();
    sbs.drain();
    std::vector<double> v;
    for (int i = 0; i < repeats; ++i) {
      SideBySide one;
      one.launch = {op};
      one.streams = {s};
      one.drain = sbs.drain;
      v.push_back(one.alone(ctx.rt, ctx.device, 0));
    }
    return median_min_max(v);
  };
  auto timed = [&](const std::function<void(int)>& op, const Stream& s) { return timed_runs(op, s)[0]; };
  // Volumes over what a part holds from n = 16 to n = 1 (the search goes up to 8).
  const int B = runner.tokens(), k = c.slots();
  std::vector<int> row_counts;
  for (int n : {16, 8, 4, 2, 1}) row_counts.push_back(std::max(1, k * B / n));
  row_counts.erase(std::unique(row_counts.begin(), row_counts.end()), row_counts.end());
  std::map<std::string, std::vector<double>> vol, ms;
  auto sample = [&](const std::string& op, double volume, double t) {
    cal.samples.push_back({op, volume, t});
    vol[op].push_back(volume);
    ms[op].push_back(t);
  };
  for (int rows : row_counts) {
    ops.size_rows(rows);
    const std::size_t row_bytes = std::size_t(rows) * c.hidden * es;
    ops.size_comm(row_bytes);
    sample("comm", double(row_bytes), timed([&](int t) { ops.comm(t); }, runner.streams().dispatch));
    sample("comp_fwd", rows, timed([&](int t) { ops.comp_fwd(t); }, runner.streams().compute));
    sample("comp_bwd", rows, timed([&](int t) { ops.comp_bwd(t); }, runner.streams().compute));
    sample("comp_middle", rows, timed([&](int t) { ops.comp_middle(t); }, runner.streams().compute));
    for (std::size_t bytes : {row_bytes, std::size_t(rows) * c.ffn * es}) {  // T_DI and T_M of such a part
      ops.size_mem(bytes);
      ops.mem_bytes = bytes;
      sample("mem", double(bytes), timed([&](int t) { ops.mem(t); }, runner.streams().copy));
    }
  }
  for (auto& [op, v] : vol) cal.fits[op] = PiecewiseLinear::fit(v, ms[op], PiecewiseLinear::every_other(v));
  // Slowdown factors at a part of n = 4.
  const int rows = std::max(1, k * B / 4);
  ops.size_rows(rows);
  ops.size_comm(std::size_t(rows) * c.hidden * es);
  ops.mem_bytes = std::size_t(rows) * c.ffn * es;
  ops.size_mem(ops.mem_bytes);
  const char* names[3] = {"comm", "comp", "mem"};
  std::vector<std::array<double, 3>> alone_runs(3);
  std::vector<double> alone(3);  // medians: SideBySide::beside's reference
  for (int y = 0; y < 3; ++y) {
    alone_runs[y] = timed_runs(sbs.launch[y], sbs.streams[y]);
    alone[y] = alone_runs[y][0];
  }
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x <= 3; ++x) {
      if (x == y) continue;
      std::vector<int> others;
      for (int o = 0; o < 3; ++o)
        if (o != y && (x == 3 || x == o)) others.push_back(o);
      std::vector<double> beside;
      for (int i = 0; i < repeats; ++i) beside.push_back(sbs.beside(ctx.rt, ctx.device, y, others, alone));
      const std::array<double, 3> with = median_min_max(beside);
      const std::string xs = x == 3 ? "all" : names[x];
      cal.alpha.alpha[{names[y], xs}] = alone[y] / with[0];
      cal.alpha_ms[{names[y], xs}] = {alone[y], alone_runs[y][1], alone_runs[y][2], with[0], with[1], with[2]};
    }
  // The layer's work outside the pipeline, from n = 1 (nothing overlaps there).
  const RunResult one = runner.run(PipelineConfig{}, true, 1, repeats);
  cal.other_ms = one.other_ms;
  ops.host.release();
  ctx.device.synchronize();
  cal.calibration_ms =
      ctx.rt.max(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return cal;
}

PartTimes part_times(const Calibration& cal, const MoEConfig& c, int tokens, int n, MemoryReuse reuse) {
  const double es = double(dtype_size(c.dtype));
  const double rows = double(c.slots()) * tokens / n;
  const double row_bytes = rows * c.hidden * es, middle_bytes = rows * c.ffn * es;
  PartCosts costs;
  costs.comm = cal.time("comm", row_bytes);
  costs.comp_fwd = cal.time("comp_fwd", rows);
  costs.comp_bwd = cal.time("comp_bwd", rows);
  costs.comp_middle = cal.time("comp_middle", rows);
  costs.mem_rows = cal.time("mem", row_bytes);
  costs.mem_middle = cal.time("mem", middle_bytes);
  return part_times_under(reuse_name(reuse), costs);
}

ModelPrediction predict(const Calibration& cal, const MoEConfig& cfg, int tokens, int n, MemoryReuse reuse) {
  ModelPrediction p;
  p.n = n;
  p.reuse = reuse;
  const PartTimes t = part_times(cal, cfg, tokens, n, reuse);
  p.forward = predict_forward(n, t, cal.alpha);
  p.backward = predict_backward(n, t, cal.alpha);
  p.total_ms = p.forward.ms + p.backward.ms + cal.other_ms;
  return p;
}

ModelPrediction choose(const Calibration& cal, const MoEConfig& cfg, int tokens, int n_min, int n_max,
                       const std::vector<MemoryReuse>& strategies) {
  std::vector<std::string> names;
  for (MemoryReuse s : strategies) names.push_back(reuse_name(s));
  const GranularityChoice best =
      choose_granularity(n_min, std::min(n_max, tokens), names, [&](int n, const std::string& s) {
        return predict(cal, cfg, tokens, n, *parse_reuse(s)).total_ms;
      });
  return predict(cal, cfg, tokens, best.parts, *parse_reuse(best.strategy));
}

}  // namespace moebench
