// moebench_m6t_t1 (m6t.t1; M6-T Table 1): ms per training step of M6-T's 3-layer and 16-layer
// MoE models (every FFN an MoE layer, capacity factor 1.25, AdamW) with top-1, top-4 and top-16
// routing and 4 prototypes of top-4, expert-parallel over every rank (DP = EP, as M6-T on 8
// GPUs), beside Table 1's ms/step and each row's ratio to top-1 at the same depth, with the
// paper's gate (k rounds of arg-max, one-hot dispatch and combine tensors: the mechanism behind
// Table 1's top-16 cost) and with ours (one fused softmax + top-k per prototype, index
// dispatch); ratio_paper_vs_fused is what the better gate changes. Writes <out>/m6t/t1.csv.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <optional>
#include "gpt/gpt_layout.h"
#include "gpt/gpt_trainer.h"
#include "harness/bench.h"
#include "kernels/capacity.h"
#include "models/paper_specs.h"
#include "models/paper_values.h"

namespace moebench {
namespace {

struct Routing {
  std::string name;
  int prototypes, top_k;
  std::string paper_key;  // experiments/reference/values.csv: 001.t1.<3layer|16layer>.<key>
  // M6-T's ms/step at `layers`, where Table 1 has that depth (3 and 16).
  std::optional<double> paper_ms(int layers) const {
    if (layers != 3 && layers != 16) return std::nullopt;
    return paper_number("001.t1." + std::to_string(layers) + "layer." + paper_key);
  }
};
const std::vector<Routing> kRoutings = {
    {"top-1", 1, 1, "top1"}, {"top-4", 1, 4, "top4"}, {"top-16", 1, 16, "top16"}, {"4 top-4", 4, 4, "4top4"}};

class T1Bench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_m6t_t1"; }
  std::string description() const override {
    return "M6-T Table 1: ms/step of the 3- and 16-layer MoE models with top-1, top-4, top-16 and 4 top-4 routing.";
  }
  void add_options(CLI::App& app) override {
    add_wholes(app, "--layers", layers_opt_, 1, 1 << 10, "Model depths (default: 3 and 16, M6-T's; tiny scale: 3)");
    add_choices(app, "--gate", gates_opt_, gate_impl_names(),
                "Gates to run: paper (M6-T's looped arg-max and one-hot dispatch), fused (ours) (default both)");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    const int W = ctx.world.size();
    const ModelSpec& m6t = model_spec("m6t-3layer");  // hidden 128, intermediate 512, 8 heads, 4096 experts
    switch (ctx.scale()) {
      case Scale::tiny:
        shape_ = {.layers = 3, .hidden = 32, .ffn = 64, .heads = 4, .seq = 16, .vocab = 64, .experts = 16, .moe_every = 1,
                  .capacity_factor = m6t.shape.capacity_factor};
        sequences_per_rank_ = 2;
        break;
      case Scale::local:
        shape_ = m6t.shape;
        shape_.seq = 64;
        shape_.vocab = 512;
        shape_.experts = 64;
        sequences_per_rank_ = 8;
        break;
      case Scale::paper:
        shape_ = m6t.shape;
        shape_.seq = 512;  // 001 gives no sequence length
        sequences_per_rank_ = m6t.batch_per_gpu;
        break;
    }
    dtype_ = ctx.dtype();
    layers_ = layers_opt_.empty() ? (ctx.scale() == Scale::tiny ? std::vector<int>{3} : std::vector<int>{3, 16}) : layers_opt_;
    gates_.clear();
    for (GateImpl g : {GateImpl::paper, GateImpl::fused})  // the paper's first: the table's rows keep that order
      if (gates_opt_.empty() || std::find(gates_opt_.begin(), gates_opt_.end(), gate_impl_name(g)) != gates_opt_.end())
        gates_.push_back(g);
    for (int L : layers_)
      for (const Routing& r : kRoutings) {
        if (auto e = validate_layout(layout(W), shape(L, r), W)) return e;
        for (GateImpl g : gates_)  // the paper's gate is fp32 only: 16-bit runs take --gate fused
          if (auto e = GptStage::validate(model(L, r, g), 1, 1)) return e;
        if (shape_.experts % r.prototypes != 0 || r.top_k > shape_.experts / r.prototypes)
          return "the " + std::to_string(shape_.experts) + " experts cannot hold " + r.name + " routing";
      }
    return std::nullopt;
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/m6t", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (int L : layers_)
      for (const Routing& r : kRoutings)
        for (GateImpl g : gates_)
          ctx.add(key(L, r, g), 1, [this, &ctx, L, r, g](benchmark::State& st) { run(st, ctx, L, r, g); });
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    trainer_.reset();
    if (ctx.rt.rank() != 0) return 0;
    std::map<std::string, Spread> ms;
    std::map<std::string, std::vector<double>> reps;  // in the order the rounds ran: they pair across rows
    for (const auto& r : runs)
      if (!r.error) ms[r.name] = r.time_ms(), reps[r.name] = r.ms();
    CsvTable t({"layers", "routing", "prototypes", "top_k", "experts", "hidden", "ffn", "heads", "seq", "vocab", "tokens_per_rank",
                "capacity", "gate", "ms_per_step", "ms_per_step_min", "ms_per_step_max", "ms_per_step_reps", "ratio_vs_top1",
                "ratio_paper_vs_fused", "paper_ms_per_step", "paper_ratio_vs_top1", "ratio_vs_top1_over_paper",
                "expert_rows_max_over_mean", "new_pool_blocks_in_measured_steps", "optimizer_ms_per_step"});
    for (int L : layers_)
      for (const Routing& r : kRoutings)
        for (GateImpl g : gates_) {
          const std::string k = key(L, r, g), top1 = key(L, kRoutings[0], g);
          if (!ms.count(k)) continue;
          const Spread s = ms[k];
          const std::optional<double> paper_ms = r.paper_ms(L);
          const bool paper = paper_ms.has_value();
          const double paper_ratio = paper ? *paper_ms / *kRoutings[0].paper_ms(L) : 0;
          const std::string ratio = ms.count(top1) ? fmt(s.median / ms[top1].median, 4) : "n/a";
          const std::string pk = key(L, r, GateImpl::paper), fk = key(L, r, GateImpl::fused);
          const std::string vs_fused =
              ms.count(pk) && ms.count(fk) ? fmt(ms[pk].median / ms[fk].median, 4) : "n/a";
          const GptConfig m = model(L, r, g);
          const int capacity = expert_capacity(m.moe.slots(), sequences_per_rank_ * shape_.seq, shape_.experts,
                                               *m.moe.capacity_factor);
          t.add_row({std::to_string(L), r.name, std::to_string(r.prototypes), std::to_string(r.top_k),
                     std::to_string(shape_.experts), std::to_string(shape_.hidden), std::to_string(shape_.ffn),
                     std::to_string(shape_.heads), std::to_string(shape_.seq), std::to_string(shape_.vocab),
                     std::to_string(sequences_per_rank_ * shape_.seq), std::to_string(capacity), gate_label(g),
                     fmt(s.median), fmt(s.min), fmt(s.max), repetitions_cell(reps[k]), ratio, vs_fused, fmt_or_na(paper_ms),
                     paper ? fmt(paper_ratio, 4) : "n/a",
                     paper && ms.count(top1) ? fmt(s.median / ms[top1].median / paper_ratio, 4) : "n/a",
                     load_.count(k) ? fmt(load_.at(k), 4) : "-", std::to_string(pool_blocks_[k]),
                     optimizer_ms_.count(k) ? fmt(optimizer_ms_.at(k)) : "-"});
          std::printf("m6t.t1 %2d layers %-8s %-5s gate %9.2f ms/step  x%s of top-1 (paper: %s ms/step, x%s)\n", L,
                      r.name.c_str(), gate_impl_name(g), s.median, ratio.c_str(),
                      fmt_or_na(paper_ms).c_str(), paper ? fmt(paper_ratio, 3).c_str() : "n/a");
        }
    t.write(ctx.opts.out_dir + "/m6t/t1.csv", ctx.provenance);
    return 0;
  }

 private:
  static ParallelLayout layout(int world) { return ParallelLayout::of(LayoutKind::dpmoe, world, 1, 1); }
  static std::string key(int layers, const Routing& r, GateImpl g) {
    return "m6t_t1/" + std::to_string(layers) + "L/" + r.name + "/" + gate_impl_name(g);
  }
  static std::string gate_label(GateImpl g) {
    return g == GateImpl::paper ? "paper: k rounds of arg-max, one-hot dispatch/combine einsums"
                                : "ours: fused softmax + top-k per prototype, index dispatch";
  }

  // M6-T's model (every FFN an MoE layer, capacity factor 1.25) at `layers`, routed by `r`.
  ModelShape shape(int layers, const Routing& r) const {
    ModelShape m = shape_;
    m.layers = layers;
    m.prototypes = r.prototypes;
    m.top_k = r.top_k;
    return m;
  }
  GptConfig model(int layers, const Routing& r, GateImpl gate) const {
    GptConfig m = gpt_config(shape(layers, r), dtype_);
    m.moe.gate = gate;
    return m;
  }

  void run(benchmark::State& st, BenchContext& ctx, int layers, const Routing& r, GateImpl g) {
    const std::string k = key(layers, r, g);
    if (!trainer_ || trainer_key_ != k) {
      trainer_.reset();
      const int W = ctx.world.size();
      trainer_ = std::make_unique<GptTrainer>(ctx.world, ctx.device, ctx.backend(), layout(W), model(layers, r, g),
                                              sequences_per_rank_ * W, 1);
      trainer_key_ = k;
      trainer_->step();  // warm-up (again each round: the rounds interleave the cases, one trainer alive at a time)
      ctx.device.synchronize();
    }
    if (phased_.insert(k).second) {
      // Where the model of this step is checked term by term (tools/local_comparison.cpp): one
      // more step, not a measured one, its optimizer timed on every rank; the busiest rank's.
      // Once per case, in its first round.
      Breakdown phases;
      trainer_->set_breakdown(&phases);
      trainer_->step();
      ctx.device.synchronize();
      trainer_->set_breakdown(nullptr);
      const auto totals = phases.totals_ms();
      // Every rank's step opens the same ranges: all of them take part in the max or none.
      if (const auto optimizer = totals.find("step.optimizer"); optimizer != totals.end())
        optimizer_ms_[k] = ctx.rt.max(optimizer->second);
    }
    // A block the pool takes from the system inside a timed step is the system's time in it
    // (docs/architecture.md, pooled memory): counted, busiest rank, so a table paying it says so.
    const std::int64_t blocks_before = trainer_->pool_blocks_taken();
    ctx.profile_begin();
    for (auto _ : st) ctx.time_iteration(st, trainer_->stream(), [&] { trainer_->step(); });
    ctx.profile_end();
    pool_blocks_[k] += std::int64_t(ctx.rt.max(double(trainer_->pool_blocks_taken() - blocks_before)));
    // The last step's routing: the busiest rank's kept expert rows over the mean rank's.
    if (const auto load = expert_load(ctx.rt, trainer_->expert_rows())) load_[k] = *load;
  }

  std::set<std::string> phased_;  // the cases whose phases step ran
  std::vector<int> layers_opt_, layers_;
  std::vector<std::string> gates_opt_;
  std::vector<GateImpl> gates_;
  ModelShape shape_;
  DType dtype_ = DType::f32;
  int sequences_per_rank_ = 8;
  std::unique_ptr<GptTrainer> trainer_;
  std::string trainer_key_;
  std::map<std::string, double> load_;  // by case: expert rows, busiest rank over the mean
  std::map<std::string, std::int64_t> pool_blocks_;  // by case: blocks taken from the system in its timed steps
  std::map<std::string, double> optimizer_ms_;       // by case: one step's step.optimizer range, busiest rank
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::T1Bench>(argc, argv); }
