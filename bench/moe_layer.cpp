// moebench_moe_layer: forward + backward of one MoE layer per dispatcher (single-rank
// reference, expert parallel = DPMoE, PPMoE), with the breakdown ranges moe.gating,
// moe.dispatch, moe.expert, moe.combine and their backward -- the single-layer analogue of
// PPMoE Tables 1 and 3 -- and the overhead ratio: layer time over the time of its expert
// GEMMs alone on the same routed rows (target <= 1.15). Writes <out>/moe/layer_<dispatcher>.csv.
#include <cstdio>
#include <filesystem>
#include "bench/moe_host.h"
#include "bench/moe_options.h"
#include "harness/bench.h"
#include "moe/init.h"
#include "moe/moe_layer.h"
#include "moe/npy.h"

namespace moebench {
namespace {

const std::vector<std::string> kRanges = {"moe.gating",      "moe.dispatch",    "moe.expert",
                                          "moe.combine",     "moe.combine.bwd", "moe.expert.bwd",
                                          "moe.dispatch.bwd", "moe.gating.bwd", "moe.sync.bwd"};
constexpr double kOverheadTarget = 1.15;

class MoELayerBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_moe_layer"; }
  std::string description() const override {
    return "One MoE layer, forward + backward, per dispatcher (local, expert_parallel, ppmoe), with its time breakdown.";
  }
  void add_options(CLI::App& app) override {
    moe_.add(app);
    app.add_option("--dispatchers", dispatchers_, "Dispatchers to run (default: all)")
        ->check(CLI::IsMember({"local", "expert_parallel", "ppmoe"}))
        ->delimiter(',');
    app.add_option("--tp", tp_, "PPMoE tensor-parallel group size (default: all ranks)");
    app.add_option("--dump", dump_dir_, "Write each layer's input, weights, routing, output and gradients as .npy here");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    MoEConfig d;
    int tokens = 0;
    switch (ctx.scale()) {
      case Scale::tiny: d.hidden = 64; d.ffn = 256; d.experts = 8; tokens = 128; warmup_ = 1; iters_ = 3; break;
      case Scale::local: d.hidden = 768; d.ffn = 3072; d.experts = 16; tokens = 4096; warmup_ = 1; iters_ = 3; break;
      case Scale::paper: d.hidden = 1024; d.ffn = 4096; d.experts = 64; tokens = 8192; warmup_ = 3; iters_ = 10; break;
    }
    if (ctx.opts.warmup >= 0) warmup_ = ctx.opts.warmup;
    if (ctx.opts.iters > 0) iters_ = ctx.opts.iters;
    const int world = ctx.world.size();
    if (tp_ < 0) tp_ = world;
    if (tp_ < 1 || world % tp_ != 0)
      return "--tp: " + std::to_string(tp_) + " must divide the number of ranks (" + std::to_string(world) + ")";
    if (dispatchers_.empty()) dispatchers_ = {"local", "expert_parallel", "ppmoe"};
    for (const auto& d2 : dispatchers_) {
      const int r = d2 == "expert_parallel" ? world : d2 == "ppmoe" ? tp_ : 1;
      if (auto e = moe_.resolve(d, tokens, ctx.dtype(), r)) {
        if (d2 == "ppmoe" && e->rfind("--experts", 0) == 0) return *e + " (the --tp group)";
        return e;
      }
    }
    const MoEConfig& c = moe_.config;
    const double es = double(dtype_size(c.dtype));
    // all experts (the local reference holds them all), weights + gradients, and rows for twice a balanced load
    const double weights = 4.0 * c.experts * c.hidden * double(c.ffn) * es;
    const double rows = 2.0 * moe_.tokens * c.slots();
    const double acts = rows * (4.0 * c.hidden + 3.0 * c.ffn) * es + 4.0 * moe_.tokens * c.experts * 4 +
                        8.0 * moe_.tokens * c.hidden * es;
    return ctx.check_fits(std::uint64_t(weights + acts), "--experts/--hidden/--ffn/--tokens");
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (const auto& d : dispatchers_) {
      benchmark::RegisterBenchmark(("moe_layer/" + d).c_str(), [this, &ctx, d](benchmark::State& st) { run(st, ctx, d); })
          ->UseManualTime()
          ->Iterations(iters_)
          ->Unit(benchmark::kMillisecond);
    }
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    if (ctx.rt.rank() != 0) return 0;
    const MoEConfig& c = moe_.config;
    for (const RunRecord& r : runs) {
      const std::string d = r.name.substr(r.name.find('/') + 1, r.name.find('/', 10) - r.name.find('/') - 1);
      if (r.error) {
        std::printf("moe_layer/%s: skipped: %s\n", d.c_str(), r.error_message.c_str());
        continue;
      }
      std::vector<std::string> cols = {"dispatcher", "tokens_per_rank", "hidden", "ffn", "experts", "prototypes",
                                       "top_k", "capacity_factor", "expert_gemm", "total_ms"};
      for (const auto& n : kRanges) cols.push_back(n + "_ms");
      for (const char* extra : {"expert_gemms_ms", "overhead_ratio", "target_ratio", "tokens_per_s",
                                "peak_model_states_bytes", "peak_activations_bytes", "peak_buffers_bytes",
                                "peak_temporary_bytes", "tokens_dropped_fraction", "load_cv"})
        cols.push_back(extra);
      CsvTable t(cols);
      const double total = r.seconds_per_iter * 1e3;
      std::vector<std::string> row = {d, std::to_string(moe_.tokens),
                                      std::to_string(c.hidden), std::to_string(c.ffn), std::to_string(c.experts),
                                      std::to_string(c.prototypes), std::to_string(c.top_k),
                                      c.capacity_factor ? fmt(*c.capacity_factor) : "dropless", moe_.expert_gemm, fmt(total)};
      for (const auto& n : kRanges) row.push_back(fmt(r.counters.at(n)));
      const double gem = r.counters.at("expert_gemms_ms");
      for (double v : {gem, total / gem, kOverheadTarget, r.counters.at("tokens_per_s"), r.counters.at("peak_model_states"),
                       r.counters.at("peak_activations"), r.counters.at("peak_buffers"), r.counters.at("peak_temporary"),
                       r.counters.at("dropped_fraction"), r.counters.at("load_cv")})
        row.push_back(fmt(v, 8));
      t.add_row(row);
      t.write(ctx.opts.out_dir + "/moe/layer_" + d + ".csv", ctx.provenance);
      std::printf("moe_layer/%-16s total %9.2f ms  expert GEMMs %9.2f ms  overhead ratio %.3f (target <= %.2f: %s)\n",
                  d.c_str(), total, gem, total / gem, kOverheadTarget, total / gem <= kOverheadTarget ? "met" : "NOT met");
    }
    return 0;
  }

 private:
  std::unique_ptr<TokenDispatcher> make(BenchContext& ctx, const std::string& d, const DispatcherEnv& env) {
    if (d == "expert_parallel") return make_expert_parallel_dispatcher(env, ctx.world);
    if (d == "ppmoe") {
      if (!tp_comm_) tp_comm_ = ctx.world.split(ctx.world.rank() / tp_, ctx.world.rank());
      return make_ppmoe_dispatcher(env, *tp_comm_);
    }
    return make_local_dispatcher(env);
  }

  void run(benchmark::State& st, BenchContext& ctx, const std::string& d) {
    const MoEConfig& c = moe_.config;
    const int T = moe_.tokens, h = c.hidden, rank = ctx.world.rank();
    ctx.alloc.reset_peaks();
    auto layer = std::make_unique<MoELayer>(c, ctx.device, ctx.alloc, make(ctx, d, DispatcherEnv{c, ctx.device, ctx.alloc}));
    layer->init(moe_.seed);
    // PPMoE ranks of one TP group hold the same tokens; otherwise every rank has its own.
    const int token_block = d == "ppmoe" ? rank / tp_ : rank;
    Buffer x = device_from_f32(ctx.device, ctx.alloc, normal_vector(std::size_t(T) * h, moe_.seed, 77, 1.f, std::size_t(token_block) * T * h),
                               c.dtype, MemTag::activations);
    Buffer dy = device_from_f32(ctx.device, ctx.alloc, normal_vector(std::size_t(T) * h, moe_.seed, 78, 1e-3f, std::size_t(token_block) * T * h),
                                c.dtype, MemTag::activations);
    Buffer y = ctx.alloc.allocate(std::size_t(T) * h * dtype_size(c.dtype), MemTag::activations);
    Buffer dx = ctx.alloc.allocate(std::size_t(T) * h * dtype_size(c.dtype), MemTag::activations);
    const Stream& s = ctx.device.default_stream();
    for (int i = 0; i < warmup_; ++i) {
      layer->forward(x.data(), T, y.data());
      layer->backward(dy.data(), dx.data());
    }
    ctx.device.synchronize();
    std::map<std::string, double> range_ms;
    Event start(ctx.backend()), stop(ctx.backend());
    ctx.profile_begin();
    for (auto _ : st) {
      Breakdown b;
      start.record(s);
      layer->forward(x.data(), T, y.data(), &b);
      layer->backward(dy.data(), dx.data(), &b);
      stop.record(s);
      ctx.device.synchronize();
      ctx.set_iteration_time(st, Event::elapsed_ms(start, stop));
      const auto totals = b.totals_ms();
      for (const auto& n : kRanges) range_ms[n] += ctx.rt.max(totals.count(n) ? totals.at(n) : 0.0);
    }
    ctx.profile_end();
    // The same expert GEMMs alone, on the rows this step routed.
    double gemm_ms = 0;
    for (int i = 0; i < iters_; ++i) {
      start.record(s);
      layer->experts().gemms_only();
      stop.record(s);
      ctx.device.synchronize();
      gemm_ms += ctx.rt.max(Event::elapsed_ms(start, stop));
    }
    if (!dump_dir_.empty()) dump(ctx, d, *layer, x, y, dy, dx);
    for (const auto& n : kRanges) st.counters[n] = range_ms[n] / iters_;
    st.counters["expert_gemms_ms"] = gemm_ms / iters_;
    st.counters["tokens_per_s"] = benchmark::Counter(double(T) * st.iterations(), benchmark::Counter::kIsRate);
    const auto load = layer->load();
    st.counters["dropped_fraction"] = load.dropped_fraction;
    st.counters["load_cv"] = load.cv;
    for (MemTag tag : {MemTag::model_states, MemTag::activations, MemTag::buffers, MemTag::temporary})
      st.counters[std::string("peak_") + mem_tag_name(tag)] = ctx.rt.max(double(ctx.alloc.peak(tag)));
  }

  void dump(BenchContext& ctx, const std::string& d, MoELayer& layer, const Buffer& x, const Buffer& y, const Buffer& dy,
            const Buffer& dx) {
    const MoEConfig& c = moe_.config;
    const std::size_t T = std::size_t(moe_.tokens), h = std::size_t(c.hidden), f = std::size_t(c.ffn);
    const std::size_t L = std::size_t(layer.experts().count()), S = std::size_t(c.slots());
    const std::string base = dump_dir_ + "/" + d + "/rank" + std::to_string(ctx.world.rank()) + "_";
    Device& dev = ctx.device;
    auto f32 = [&](const void* p, std::size_t n, DType t) { return host_f32(dev, ctx.alloc, p, n, t); };
    auto i32 = [&](const Buffer& b, std::size_t n) {
      std::vector<std::int32_t> v(n);
      dev.copy_to_host(v.data(), b.data(), n * 4, dev.default_stream());
      return v;
    };
    write_npy(base + "x.npy", f32(x.data(), T * h, c.dtype).data(), {T, h});
    write_npy(base + "y.npy", f32(y.data(), T * h, c.dtype).data(), {T, h});
    write_npy(base + "dy.npy", f32(dy.data(), T * h, c.dtype).data(), {T, h});
    write_npy(base + "dx.npy", f32(dx.data(), T * h, c.dtype).data(), {T, h});
    write_npy(base + "gate_weight.npy", f32(layer.gate().weight().data(), h * c.experts, DType::f32).data(), {h, std::size_t(c.experts)});
    write_npy(base + "gate_grad.npy", f32(layer.gate().grad().data(), h * c.experts, DType::f32).data(), {h, std::size_t(c.experts)});
    write_npy(base + "w1.npy", f32(layer.experts().w1().data(), L * h * f, c.dtype).data(), {L, h, f});
    write_npy(base + "w2.npy", f32(layer.experts().w2().data(), L * f * h, c.dtype).data(), {L, f, h});
    write_npy(base + "w1_grad.npy", f32(layer.experts().w1_grad().data(), L * h * f, c.dtype).data(), {L, h, f});
    write_npy(base + "w2_grad.npy", f32(layer.experts().w2_grad().data(), L * f * h, c.dtype).data(), {L, f, h});
    const Routing& r = layer.routing();
    write_npy(base + "route_expert.npy", i32(r.expert, T * S).data(), {T, S});
    write_npy(base + "route_position.npy", i32(r.position, T * S).data(), {T, S});
    write_npy(base + "route_weight.npy", f32(r.weight.data(), T * S, DType::f32).data(), {T, S});
  }

  MoEOptions moe_;
  std::vector<std::string> dispatchers_;
  int tp_ = -1;
  std::string dump_dir_;
  int warmup_ = 1, iters_ = 3;
  std::unique_ptr<Communicator> tp_comm_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) {
  moebench::MoELayerBench bench;
  return moebench::bench_main(argc, argv, bench);
}
