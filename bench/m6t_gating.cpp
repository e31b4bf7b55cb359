// moebench_m6t_gating (m6t.gating): cost of top-k routing against expert prototyping (M6-T
// Sec. 3.2-3.3, Table 1): for top-1, 2, 4, 16 and 4 prototypes x top-4 (and x top-1), the
// gate kernel alone (softmax + top-k), the whole gate (projection, top-k, capacity, aux loss)
// and the layer forward + backward. M6-T Table 1's ms/step sit beside the layer times as
// ratios to top-1 (a whole model step there, one layer here). Targets: 4 x top-4 gate+layer
// <= 1.02 x top-4; top-16 gate kernel <= 2 x top-1. Times are medians over repetitions, with
// their spread; ratios are of medians of one run. Writes <out>/m6t/gating.csv. One device, one rank.
#include <cstdio>
#include <map>
#include <optional>
#include "runtime/host_copy.h"
#include "harness/bench.h"
#include "kernels/gating.h"
#include "moe/init.h"
#include "moe/moe_layer.h"
#include "models/paper_specs.h"
#include "models/paper_values.h"

namespace moebench {
namespace {

// paper_key: M6-T Table 1's column (experiments/reference/values.csv 001.t1.3layer.<key>), if it has one.
struct RoutingCase { std::string name; int prototypes, k; const char* paper_key; };
const std::vector<RoutingCase> kRoutings = {{"top1", 1, 1, "top1"},     {"top2", 1, 2, nullptr},
                                         {"top4", 1, 4, "top4"},     {"top16", 1, 16, "top16"},
                                         {"4xtop4", 4, 4, "4top4"}, {"4xtop1", 4, 1, nullptr}};
struct Size { std::string name; int hidden, ffn, experts, tokens; };

class GatingBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_m6t_gating"; }
  std::string description() const override {
    return "Top-k routing vs expert prototyping: gate kernel, gate and layer time (M6-T Table 1).";
  }
  bool takes_iteration_counts() const override { return true; }
  void add_options(CLI::App& app) override {
    add_choices(app, "--sizes", size_names_, {"m6t", "gpt"},
                "m6t (M6-T Table 3: h 128, f 512, 4096 experts) and/or gpt (h 768, f 3072, 64 experts); default by scale");
    add_real(app, "--capacity-factor", gamma_opt_, above(0), "Capacity factor (default 1.25, as M6-T)");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    if (ctx.world.size() != 1)
      return "m6t.gating measures one device, so it runs on one rank; got " + std::to_string(ctx.world.size()) +
             " (launch it with 1 rank: --ranks 1)";
    gamma_ = gamma_opt_.value_or(1.25);
    switch (ctx.scale()) {
      case Scale::tiny: sizes_ = {{"m6t", 32, 64, 64, 128}}; warmup_ = 1; iters_ = 2; break;
      // 2 cores: the M6-T widths with 512 instead of 4096 experts and 1024 tokens.
      case Scale::local: sizes_ = {{"m6t", 128, 512, 512, 1024}}; warmup_ = 1; iters_ = 3; break;
      case Scale::paper: {  // M6-T Table 3's 3-layer model; 003 Table 3's GPT-S layer with 64 experts
        const ModelSpec& m = model_spec("m6t-3layer");
        const MoELayerSpec& g = moe_layer_spec("gpt-s");
        sizes_ = {{"m6t", m.shape.hidden, m.shape.ffn, m.shape.experts, 4096}, {"gpt", g.hidden, g.ffn, g.experts.front(), 4096}};
        warmup_ = 3; iters_ = 10;
        break;
      }
    }
    if (!size_names_.empty()) {
      std::vector<Size> keep;
      for (const Size& s : sizes_)
        if (std::find(size_names_.begin(), size_names_.end(), s.name) != size_names_.end()) keep.push_back(s);
      if (keep.empty()) return "--sizes: none of the given sizes is defined at --scale " + ctx.opts.scale;
      sizes_ = keep;
    }
    warmup_ = ctx.opts.warmup.value_or(warmup_);
    iters_ = ctx.opts.iters.value_or(iters_);
    try {
      for (const auto& r : kRoutings)
        if (r.paper_key) paper_[r.paper_key] = paper_number(std::string("001.t1.3layer.") + r.paper_key);
    } catch (const Error& e) {
      return std::string("the papers' values: ") + e.what();
    }
    for (const Size& s : sizes_)
      for (const auto& r : kRoutings) {
        MoEConfig c = config(s, r, ctx.dtype());
        if (auto e = c.validate(s.tokens, 1)) return *e + " (size " + s.name + ", " + r.name + ")";
      }
    return std::nullopt;
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/m6t", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (const Size& s : sizes_)
      for (const auto& r : kRoutings)
        ctx.add("m6t_gating/" + s.name + "/" + r.name, iters_, [this, &ctx, s, r](benchmark::State& st) { run(st, ctx, s, r); });
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    fixture_.reset();
    if (ctx.rt.rank() != 0) return 0;
    std::map<std::string, const RunRecord*> by;
    for (const auto& r : runs)
      if (!r.error) by[r.name] = &r;
    // gate_kernel_ms_reps: each repetition's, in the order the rounds ran (they pair across rows).
    CsvTable t({"size", "routing", "prototypes", "top_k", "experts", "hidden", "ffn", "tokens", "capacity_factor",
                "gate_kernel_ms", "gate_kernel_ms_min", "gate_kernel_ms_max", "gate_kernel_ms_reps", "gate_ms", "gate_ms_min",
                "gate_ms_max", "layer_ms", "layer_ms_min", "layer_ms_max", "layer_vs_top1", "gate_kernel_vs_top1",
                "paper_3layer_ms_per_step", "paper_3layer_vs_top1", "ratio_of_ratios", "repetitions"});
    for (const Size& s : sizes_) {
      auto find = [&](const std::string& routing) -> const RunRecord* {
        const auto it = by.find("m6t_gating/" + s.name + "/" + routing);
        return it == by.end() ? nullptr : it->second;
      };
      const RunRecord *top1 = find("top1"), *top4 = find("top4"), *top16 = find("top16"), *p44 = find("4xtop4"),
                      *p41 = find("4xtop1");
      for (const auto& r : kRoutings) {
        const RunRecord* run = find(r.name);
        if (!run || !top1) continue;
        const Spread layer = run->time_ms(), kern = run->counter("gate_kernel_ms"), gate = run->counter("gate_ms");
        const double layer1 = top1->time_ms().median, kern1 = top1->counter("gate_kernel_ms").median;
        std::optional<double> paper, paper_ratio, ratio_of_ratios;
        if (r.paper_key) {
          paper = paper_.at(r.paper_key);
          paper_ratio = *paper / paper_.at("top1");
          ratio_of_ratios = (layer.median / layer1) / *paper_ratio;
        }
        t.add_row({s.name, r.name, std::to_string(r.prototypes), std::to_string(r.k), std::to_string(s.experts),
                   std::to_string(s.hidden), std::to_string(s.ffn), std::to_string(s.tokens), fmt(gamma_),
                   fmt(kern.median), fmt(kern.min), fmt(kern.max), repetitions_cell(run->counters.at("gate_kernel_ms")),
                   fmt(gate.median), fmt(gate.min), fmt(gate.max),
                   fmt(layer.median), fmt(layer.min), fmt(layer.max), fmt(layer.median / layer1),
                   fmt(kern.median / kern1), fmt_or_na(paper), fmt_or_na(paper_ratio), fmt_or_na(ratio_of_ratios),
                   std::to_string(run->repetitions())});
      }
      if (top1 && top4 && top16 && p44 && p41) {
        auto gate_layer = [](const RunRecord* r) { return r->time_ms().median + r->counter("gate_ms").median; };
        const double a = gate_layer(p44) / gate_layer(top4), flop_matched = gate_layer(p41) / gate_layer(top4);
        const double b = top16->counter("gate_kernel_ms").median / top1->counter("gate_kernel_ms").median;
        std::printf("m6t_gating/%s: 4 x top-4 / top-4 (gate + layer) = %.3f (target <= 1.02: %s); "
                    "top-16 / top-1 gate kernel = %.3f (target <= 2: %s) [%s backend, medians of %d repetitions]\n",
                    s.name.c_str(), a, a <= 1.02 ? "met" : "NOT met", b, b <= 2.0 ? "met" : "NOT met",
                    backend_name(ctx.backend()), ctx.repetitions());
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

  // One routing case's layer and tensors, made at its first repetition and kept for the rest.
  struct Fixture {
    std::string key;
    std::unique_ptr<MoELayer> layer;
    Buffer x, dy, y, dx, probs, e, w;
    std::optional<MoEContext> last;  // the last forward's micro-batch (its logits feed the kernel timing)
  };

  Fixture& fixture(BenchContext& ctx, const Size& s, const RoutingCase& r) {
    const std::string key = s.name + "/" + r.name;
    if (fixture_ && fixture_->key == key) return *fixture_;
    fixture_.reset();
    auto f = std::make_unique<Fixture>();
    f->key = key;
    const MoEConfig c = config(s, r, ctx.dtype());
    const int T = s.tokens;
    const Stream& s0 = ctx.device.default_stream();
    f->layer = std::make_unique<MoELayer>(c, ctx.device, ctx.alloc, make_local_dispatcher(DispatcherEnv{c, ctx.device, ctx.alloc}));
    f->layer->init(5, s0);
    f->x = device_from_f32(ctx.device, ctx.alloc, normal_vector(std::size_t(T) * c.hidden, 5, 77, 1.f), c.dtype, MemTag::activations);
    f->dy = device_from_f32(ctx.device, ctx.alloc, normal_vector(std::size_t(T) * c.hidden, 5, 78, 1e-3f), c.dtype, MemTag::activations);
    f->y = ctx.alloc.allocate(f->x.bytes(), MemTag::activations);
    f->dx = ctx.alloc.allocate(f->x.bytes(), MemTag::activations);
    const GateShape g{T, c.experts, c.prototypes, c.top_k};
    f->probs = ctx.alloc.allocate(std::size_t(T) * c.experts * 4, MemTag::temporary);
    f->e = ctx.alloc.allocate(std::size_t(T) * g.slots() * 4, MemTag::temporary);
    f->w = ctx.alloc.allocate(std::size_t(T) * g.slots() * 4, MemTag::temporary);
    for (int i = 0; i < warmup_; ++i) {
      MoEContext mb = f->layer->forward(f->x.data(), T, f->y.data(), s0);
      f->layer->backward(mb, f->dy.data(), f->dx.data(), s0);
    }
    ctx.device.synchronize();
    fixture_ = std::move(f);
    return *fixture_;
  }

  void run(benchmark::State& st, BenchContext& ctx, const Size& s, const RoutingCase& r) {
    Fixture& f = fixture(ctx, s, r);
    MoELayer& layer = *f.layer;
    const MoEConfig& c = layer.config();
    const int T = s.tokens;
    const Stream& str = ctx.device.default_stream();
    const Exec ex = ctx.device.exec(str);
    const GateShape g{T, c.experts, c.prototypes, c.top_k};
    double kernel_ms = 0, gate_ms = 0;
    ctx.profile_begin();
    for (auto _ : st) {
      f.last.reset();
      ctx.time_iteration(st, str, [&] {
        f.last = layer.forward(f.x.data(), T, f.y.data(), str);
        layer.backward(*f.last, f.dy.data(), f.dx.data(), str);
      });
      // The gate kernel alone on the logits of the last forward, then the whole gate.
      kernel_ms += ctx.time_ms(str, [&] {
        softmax_topk(ex, g, f.last->routing.logits.as<float>(), f.probs.as<float>(), f.e.as<std::int32_t>(),
                     f.w.as<float>());
      });
      gate_ms += ctx.time_ms(str, [&] { layer.gate().forward(f.x.data(), T, 1, str); });
    }
    ctx.profile_end();
    st.counters["gate_kernel_ms"] = kernel_ms / double(st.iterations());
    st.counters["gate_ms"] = gate_ms / double(st.iterations());
  }

  std::vector<std::string> size_names_;
  std::vector<Size> sizes_;
  std::optional<double> gamma_opt_;
  double gamma_ = 1.25;
  std::unique_ptr<Fixture> fixture_;
  int warmup_ = 1, iters_ = 3;
  std::map<std::string, double> paper_;  // M6-T Table 1's 3-layer ms/step by routing
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::GatingBench>(argc, argv); }
