// moebench_m6t_gating (m6t.gating): cost of top-k routing against expert prototyping (M6-T
// Sec. 3.2-3.3, Table 1): for top-1, 2, 4, 16 and 4 prototypes x top-4 (and x top-1), the
// gate kernel alone (softmax + top-k), the whole gate (projection, top-k, capacity, aux loss)
// and the layer forward + backward. M6-T Table 1's ms/step sit beside the layer times as
// ratios to top-1 (a whole model step there, one layer here). Targets: 4 x top-4 gate+layer
// <= 1.02 x top-4; top-16 gate kernel <= 2 x top-1. Writes <out>/m6t/gating.csv.
#include <libfccp/csv.h>
#include <cstdio>
#include <map>
#include "bench/moe_host.h"
#include "harness/bench.h"
#include "kernels/gating.h"
#include "moe/init.h"
#include "moe/moe_layer.h"

namespace moebench {
namespace {

struct RoutingCase { std::string name; int prototypes, k; const char* paper_column; };
const std::vector<RoutingCase> kRoutings = {{"top1", 1, 1, "Top-1"},     {"top2", 1, 2, nullptr},
                                         {"top4", 1, 4, "Top-4"},     {"top16", 1, 16, "Top-16"},
                                         {"4xtop4", 4, 4, "4 Top-4"}, {"4xtop1", 4, 1, nullptr}};
struct Size { std::string name; int hidden, ffn, experts, tokens; };

class GatingBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_m6t_gating"; }
  std::string description() const override {
    return "Top-k routing vs expert prototyping: gate kernel, gate and layer time (M6-T Table 1).";
  }
  void add_options(CLI::App& app) override {
    app.add_option("--sizes", size_names_, "m6t (M6-T Table 3: h 128, f 512, 4096 experts) and/or gpt (h 768, f 3072, 64 experts)")
        ->check(CLI::IsMember({"m6t", "gpt"}))
        ->delimiter(',');
    app.add_option("--reference", reference_, "M6-T Table 1 as CSV")->capture_default_str();
    app.add_option("--capacity-factor", gamma_, "Capacity factor (M6-T uses 1.25)")->check(CLI::PositiveNumber)->capture_default_str();
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    switch (ctx.scale()) {
      case Scale::tiny: sizes_ = {{"m6t", 32, 64, 64, 128}}; warmup_ = 1; iters_ = 2; break;
      // 2 cores: the M6-T widths with 512 instead of 4096 experts and 1024 tokens.
      case Scale::local: sizes_ = {{"m6t", 128, 512, 512, 1024}}; warmup_ = 1; iters_ = 3; break;
      case Scale::paper: sizes_ = {{"m6t", 128, 512, 4096, 4096}, {"gpt", 768, 3072, 64, 4096}}; warmup_ = 3; iters_ = 10; break;
    }
    if (!size_names_.empty()) {
      std::vector<Size> keep;
      for (const Size& s : sizes_)
        if (std::find(size_names_.begin(), size_names_.end(), s.name) != size_names_.end()) keep.push_back(s);
      if (keep.empty()) return "--sizes: none of the given sizes is defined at --scale " + ctx.opts.scale;
      sizes_ = keep;
    }
    if (ctx.opts.warmup >= 0) warmup_ = ctx.opts.warmup;
    if (ctx.opts.iters > 0) iters_ = ctx.opts.iters;
    try {
      io::CSVReader<5, io::trim_chars<' '>, io::double_quote_escape<',', '"'>> in(reference_);
      in.read_header(io::ignore_extra_column, "Model Size", "Top-1", "Top-4", "Top-16", "4 Top-4");
      std::string model;
      double t1, t4, t16, p44;
      while (in.read_row(model, t1, t4, t16, p44)) paper_[model] = {{"Top-1", t1}, {"Top-4", t4}, {"Top-16", t16}, {"4 Top-4", p44}};
    } catch (const std::exception& e) {
      return "--reference: cannot read " + reference_ + ": " + e.what();
    }
    for (const Size& s : sizes_)
      for (const auto& r : kRoutings) {
        MoEConfig c = config(s, r, ctx.dtype());
        if (auto e = c.validate(s.tokens, 1)) return *e + " (size " + s.name + ", " + r.name + ")";
      }
    return std::nullopt;
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (const Size& s : sizes_)
      for (const auto& r : kRoutings)
        benchmark::RegisterBenchmark(("m6t_gating/" + s.name + "/" + r.name).c_str(),
                                     [this, &ctx, s, r](benchmark::State& st) { run(st, ctx, s, r); })
            ->UseManualTime()
            ->Iterations(iters_)
            ->Unit(benchmark::kMillisecond);
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    if (ctx.rt.rank() != 0) return 0;
    std::map<std::string, const RunRecord*> by;
    for (const auto& r : runs)
      if (!r.error) by[r.name.substr(0, r.name.find("/iterations"))] = &r;
    CsvTable t({"size", "routing", "prototypes", "top_k", "experts", "hidden", "ffn", "tokens", "capacity_factor",
                "gate_kernel_ms", "gate_ms", "layer_ms", "layer_vs_top1", "gate_kernel_vs_top1",
                "paper_3layer_ms_per_step", "paper_3layer_vs_top1", "ratio_of_ratios"});
    const auto& p3 = paper_["3-layer"];
    for (const Size& s : sizes_) {
      const RunRecord* top1 = by["m6t_gating/" + s.name + "/top1"];
      const RunRecord* top4 = by["m6t_gating/" + s.name + "/top4"];
      const RunRecord* top16 = by["m6t_gating/" + s.name + "/top16"];
      const RunRecord* p44 = by["m6t_gating/" + s.name + "/4xtop4"];
      const RunRecord* p41 = by["m6t_gating/" + s.name + "/4xtop1"];
      for (const auto& r : kRoutings) {
        const RunRecord* run = by["m6t_gating/" + s.name + "/" + r.name];
        if (!run || !top1) continue;
        const double layer = run->seconds_per_iter * 1e3, layer1 = top1->seconds_per_iter * 1e3;
        const double kern = run->counters.at("gate_kernel_ms"), kern1 = top1->counters.at("gate_kernel_ms");
        double paper = NAN, paper_ratio = NAN;
        if (r.paper_column && p3.count(r.paper_column)) {
          paper = p3.at(r.paper_column);
          paper_ratio = paper / p3.at("Top-1");
        }
        t.add_row({s.name, r.name, std::to_string(r.prototypes), std::to_string(r.k), std::to_string(s.experts),
                   std::to_string(s.hidden), std::to_string(s.ffn), std::to_string(s.tokens), fmt(gamma_), fmt(kern),
                   fmt(run->counters.at("gate_ms")), fmt(layer), fmt(layer / layer1), fmt(kern / kern1), fmt(paper),
                   fmt(paper_ratio), fmt((layer / layer1) / paper_ratio)});
      }
      if (top1 && top4 && top16 && p44 && p41) {
        auto gate_layer = [](const RunRecord* r) { return r->seconds_per_iter * 1e3 + r->counters.at("gate_ms"); };
        const double a = gate_layer(p44) / gate_layer(top4), flop_matched = gate_layer(p41) / gate_layer(top4);
        const double b = top16->counters.at("gate_kernel_ms") / top1->counters.at("gate_kernel_ms");
        std::printf("m6t_gating/%s: 4 x top-4 / top-4 (gate + layer) = %.3f (target <= 1.02: %s); "
                    "top-16 / top-1 gate kernel = %.3f (target <= 2: %s) [%s backend]\n",
                    s.name.c_str(), a, a <= 1.02 ? "met" : "NOT met", b, b <= 2.0 ? "met" : "NOT met",
                    backend_name(ctx.backend()));
        std::printf("m6t_gating/%s: FLOP-matched 4 x top-1 / top-4 (gate + layer) = %.3f\n", s.name.c_str(), flop_matched);
      }
    }
    t.write(ctx.opts.out_dir + "/m6t/gating.csv", ctx.provenance);
    return 0;
  }

 private:
  MoEConfig config(const Size& s, const RoutingCase& r, DType t) const {
    MoEConfig c;
    c.hidden = s.hidden; c.ffn = s.ffn; c.experts = s.experts;
    c.prototypes = r.prototypes; c.top_k = r.k;
    c.capacity_factor = gamma_;
    c.dtype = t;
    return c;
  }

  void run(benchmark::State& st, BenchContext& ctx, const Size& s, const RoutingCase& r) {
    const MoEConfig c = config(s, r, ctx.dtype());
    const int T = s.tokens;
    MoELayer layer(c, ctx.device, ctx.alloc, make_local_dispatcher(DispatcherEnv{c, ctx.device, ctx.alloc}));
    layer.init(5);
    Buffer x = device_from_f32(ctx.device, ctx.alloc, normal_vector(std::size_t(T) * c.hidden, 5, 77, 1.f), c.dtype, MemTag::activations);
    Buffer dy = device_from_f32(ctx.device, ctx.alloc, normal_vector(std::size_t(T) * c.hidden, 5, 78, 1e-3f), c.dtype, MemTag::activations);
    Buffer y = ctx.alloc.allocate(x.bytes(), MemTag::activations), dx = ctx.alloc.allocate(x.bytes(), MemTag::activations);
    const Stream& str = ctx.device.default_stream();
    const Exec ex = ctx.device.exec(str);
    // The gate kernel alone on the logits of the last forward.
    Routing scratch;
    const GateShape g{T, c.experts, c.prototypes, c.top_k};
    Buffer probs = ctx.alloc.allocate(std::size_t(T) * c.experts * 4, MemTag::temporary);
    Buffer e = ctx.alloc.allocate(std::size_t(T) * g.slots() * 4, MemTag::temporary);
    Buffer w = ctx.alloc.allocate(std::size_t(T) * g.slots() * 4, MemTag::temporary);
    for (int i = 0; i < warmup_; ++i) {
      layer.forward(x.data(), T, y.data());
      layer.backward(dy.data(), dx.data());
    }
    Event a(ctx.backend()), b(ctx.backend());
    double kernel_ms = 0, gate_ms = 0;
    ctx.profile_begin();
    for (auto _ : st) {
      a.record(str);
      layer.forward(x.data(), T, y.data());
      layer.backward(dy.data(), dx.data());
      b.record(str);
      ctx.device.synchronize();
      ctx.set_iteration_time(st, Event::elapsed_ms(a, b));
      a.record(str);
      softmax_topk(ex, g, layer.routing().logits.as<float>(), probs.as<float>(), e.as<std::int32_t>(), w.as<float>());
      b.record(str);
      ctx.device.synchronize();
      kernel_ms += ctx.rt.max(Event::elapsed_ms(a, b));
      a.record(str);
      layer.gate().forward(x.data(), T, 1, scratch);
      b.record(str);
      ctx.device.synchronize();
      gate_ms += ctx.rt.max(Event::elapsed_ms(a, b));
    }
    ctx.profile_end();
    st.counters["gate_kernel_ms"] = kernel_ms / iters_;
    st.counters["gate_ms"] = gate_ms / iters_;
  }

  std::vector<std::string> size_names_;
  std::vector<Size> sizes_;
  std::string reference_ = std::string(MOEBENCH_SOURCE_DIR) + "/experiments/reference/m6t_table1.csv";
  double gamma_ = 1.25;
  int warmup_ = 1, iters_ = 3;
  std::map<std::string, std::map<std::string, double>> paper_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) {
  moebench::GatingBench bench;
  return moebench::bench_main(argc, argv, bench);
}
