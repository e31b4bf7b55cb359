// moebench_ppmoe_layouts (ppmoe.t2; PPMoE Table 2): one training step -- forward, backward,
// gradient synchronisation and AdamW -- of a dense GPT backbone and of its MoE model (an MoE
// layer on every other FFN) in the layouts of Table 2: Dense with TP + PP, DP + TP (ZeRO-1) and
// DP (ZeRO-1); DPMoE with DP = EP (all-to-all) and DP + TP; PPMoE with TP + PP (the experts
// inside the TP group: index-select and all-reduce). Throughput in tokens per second per rank
// and the speed ratio to the slowest dense row (the paper's way), beside the paper's row.
// At the local scale the rows are the small setting's (0.3B dense, 6.7B MoE) shrunk to 4 ranks
// and a small model; at the paper scale, GPT-3 Medium's sizes on the paper's rank counts.
// Writes <out>/ppmoe/t2.csv.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include "harness/bench.h"
#include "models/paper_specs.h"
#include "models/paper_values.h"
#include "gpt/gpt_trainer.h"

namespace moebench {
namespace {

using Kind = LayoutKind;

struct Row {
  ParallelLayout layout;
  // The paper's row it stands for (000 Table 2, small setting), as experiments/reference/values.csv
  // names it ("000.t2.r1"); empty for a layout of the user's.
  std::string paper;
  std::string paper_row() const { return paper.empty() ? "(a layout of the user's)" : paper_value(paper + ".throughput").row; }
  std::optional<double> paper_throughput() const {
    return paper.empty() ? std::nullopt : std::optional(paper_number(paper + ".throughput"));
  }
  // Over the slowest dense row, in %: the MoE rows only.
  std::optional<double> paper_speed_ratio() const {
    return paper.empty() || layout.kind == LayoutKind::dense ? std::nullopt : std::optional(paper_number(paper + ".speed_ratio"));
  }
};

// 000 Table 2's small setting on 32 V100s, and the same layouts on 4 ranks.
const std::vector<Row> kPaperRows = {
    {ParallelLayout::of(Kind::dense, 1, 8, 4, false), "000.t2.r1"}, {ParallelLayout::of(Kind::dense, 4, 8, 1, true), "000.t2.r2"},
    {ParallelLayout::of(Kind::dense, 32, 1, 1, true), "000.t2.r3"}, {ParallelLayout::of(Kind::dpmoe, 32, 1, 1, true), "000.t2.r4"},
    {ParallelLayout::of(Kind::dpmoe, 4, 8, 1, true), "000.t2.r5"},  {ParallelLayout::of(Kind::ppmoe, 1, 8, 4, false), "000.t2.r6"},
};
Row shrunk(const Row& r) {
  Row s = r;
  const ParallelLayout& l = r.layout;
  if (l.dp == 1) s.layout = ParallelLayout::of(l.kind, 1, 2, 2, l.zero);       // TP + PP
  else if (l.tp > 1) s.layout = ParallelLayout::of(l.kind, 2, 2, 1, l.zero);   // DP + TP
  else s.layout = ParallelLayout::of(l.kind, 4, 1, 1, l.zero);                 // DP alone
  return s;
}

class LayoutsBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_ppmoe_layouts"; }
  std::string description() const override {
    return "PPMoE Table 2: training-step throughput of Dense, DPMoE and PPMoE in its DP / TP / PP / EP / ZeRO layouts.";
  }
  // A local step takes a fraction of a second: 15 rounds, so that a ratio's interval is its 4th to
  // 12th paired repetition rather than the two most disturbed ones.
  int repetitions_at(Scale s) const override { return s == Scale::local ? 15 : BenchProgram::repetitions_at(s); }
  void add_options(CLI::App& app) override {
    add_whole(app, "--micro-batches", micro_opt_, 1, 1 << 12, "Micro-batches per step in the pipelined rows (default 4)");
    add_choice(app, "--layout", layout_opt_, layout_options(),
               "Run this layout instead of Table 2's rows (with --dp, --tp, --pp, --zero): " + layout_options_help());
    add_whole(app, "--dp", dp_opt_, 1, 1 << 16, "--layout: data-parallel size (default: the ranks over --tp x --pp)");
    add_whole(app, "--tp", tp_opt_, 1, 1 << 16, "--layout: tensor-parallel size (default 1)");
    add_whole(app, "--pp", pp_opt_, 1, 1 << 16, "--layout: pipeline stages (default 1)");
    add_flag(app, "--zero", zero_, "--layout: ZeRO-1 for the data-parallel gradients");
    add_wholes(app, "--rows", row_opt_, 1, int(kPaperRows.size()),
               "Which of Table 2's small-setting rows, 1-based (default: all " + std::to_string(kPaperRows.size()) + ")");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    const int W = ctx.world.size();
    const ModelSpec& medium = model_spec("gpt3-medium");
    switch (ctx.scale()) {
      case Scale::tiny:
        shape_ = {.layers = 4, .hidden = 32, .ffn = 64, .heads = 4, .seq = 16, .vocab = 64, .experts = 8, .moe_every = 2};
        sequences_ = 8;
        break;
      case Scale::local:
        shape_ = {.layers = 4, .hidden = 128, .ffn = 512, .heads = 4, .seq = 64, .vocab = 512, .experts = 8, .moe_every = 2};
        sequences_ = 8;
        break;
      case Scale::paper:
        shape_ = medium.shape;
        sequences_ = W;  // one sequence of 2048 tokens per rank
        break;
    }
    micro_ = micro_opt_.value_or(4);
    rows_.clear();
    const bool custom = !layout_opt_.empty();
    for (const auto& [given, option] : {std::pair{bool(dp_opt_), "--dp"}, std::pair{bool(tp_opt_), "--tp"},
                                        std::pair{bool(pp_opt_), "--pp"}, std::pair{zero_, "--zero"}})
      if (given && !custom) {
        std::string layouts;
        for (const std::string& o : layout_options()) layouts += (layouts.empty() ? "" : "|") + o;
        return std::string(option) + ": only with --layout " + layouts + " (Table 2's rows set their own)";
      }
    if (custom && !row_opt_.empty()) return "--rows: Table 2's rows, or --layout: not both";
    if (custom) {
      const LayoutKind k = *parse_layout_option(layout_opt_);
      const int tp = tp_opt_.value_or(1), pp = pp_opt_.value_or(1);
      // As Megatron does, data parallelism takes the ranks that tensor and pipeline parallelism leave.
      if (!dp_opt_ && W % (tp * pp) != 0)
        return "--tp x --pp: " + std::to_string(tp) + " x " + std::to_string(pp) + " does not divide the job's " +
               std::to_string(W) + " ranks (--dp is the ranks over --tp x --pp unless given)";
      const ParallelLayout l = ParallelLayout::of(k, dp_opt_.value_or(W / (tp * pp)), tp, pp, zero_);
      if (l.dp * l.tp * l.pp != W)
        return "--dp x --tp x --pp: " + std::to_string(l.dp) + " x " + std::to_string(l.tp) + " x " + std::to_string(l.pp) +
               " = " + std::to_string(l.dp * l.tp * l.pp) + " ranks, but the job has " + std::to_string(W);
      rows_.push_back(Row{l, ""});
    }
    for (std::size_t i = 0; i < kPaperRows.size() && !custom; ++i)
      if (row_opt_.empty() || std::count(row_opt_.begin(), row_opt_.end(), int(i) + 1))
        rows_.push_back(ctx.scale() == Scale::paper ? kPaperRows[i] : shrunk(kPaperRows[i]));
    for (const Row& row : rows_) {
      const ParallelLayout& r = row.layout;
      if (auto e = validate_layout(r, shape_, W))
        return *e + (r.dp * r.tp * r.pp != W ? " (the local scale runs on 4 ranks, the paper scale on 32)" : "");
      const int per_dp = sequences_ / r.dp, micro = r.pp > 1 ? micro_ : 1;
      if (sequences_ % r.dp != 0 || per_dp % micro != 0)
        return "--micro-batches: " + std::to_string(micro) + " does not divide the " + std::to_string(per_dp) +
               " sequences each data-parallel rank of " + r.describe() + " takes";
    }
    return std::nullopt;
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/ppmoe", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (std::size_t i = 0; i < rows_.size(); ++i)
      ctx.add(key(i), 1,
              [this, &ctx, i](benchmark::State& st) { run(st, ctx, rows_[i].layout); });
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    trainer_.reset();
    if (ctx.rt.rank() != 0) return 0;
    const int W = ctx.world.size();
    const double tokens = double(sequences_) * shape_.seq;
    std::map<std::string, Spread> ms;
    std::map<std::string, std::vector<double>> reps;  // in the order the rounds ran: they pair across rows
    for (const auto& r : runs)
      if (!r.error) ms[r.name] = r.time_ms(), reps[r.name] = r.ms();
    double slowest_dense = 0;
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      const std::string key = this->key(i);
      if (rows_[i].layout.kind == Kind::dense && ms.count(key))
        slowest_dense = std::max(slowest_dense, ms[key].median);
    }
    CsvTable t({"model", "dp", "tp", "pp", "ep", "zero", "step_ms", "step_ms_min", "step_ms_max", "step_ms_reps",
                "tokens_per_s_per_rank", "speed_ratio_vs_slowest_dense", "paper_row", "paper_tokens_per_s_per_gpu",
                "paper_speed_ratio", "speed_ratio_over_paper", "layers", "hidden", "ffn", "heads", "seq", "vocab", "experts", "sequences_per_step",
                "micro_batches", "expert_rows_max_over_mean"});
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      const Row& row = rows_[i];
      const ParallelLayout& r = row.layout;
      const std::string key = this->key(i);
      if (!ms.count(key)) continue;
      const Spread s = ms[key];
      const double tput = tokens / (s.median / 1e3) / W;
      // The paper's speed ratio: throughput over the slowest dense row's (same tokens per step).
      const bool has_ratio = r.kind != Kind::dense && slowest_dense > 0;
      const std::string ratio = has_ratio ? fmt(100.0 * slowest_dense / s.median, 4) + "%" : "-";
      const std::optional<double> paper_ratio = row.paper_speed_ratio();
      const std::string paper_ratio_text = paper_ratio ? fmt(*paper_ratio, 3) + "%" : "-";
      t.add_row({layout_kind_name(r.kind), std::to_string(r.dp), std::to_string(r.tp), std::to_string(r.pp),
                 r.kind == Kind::dense ? "1" : std::to_string(shape_.experts), r.zero ? "yes" : "no", fmt(s.median), fmt(s.min), fmt(s.max), repetitions_cell(reps[key]), fmt(tput), ratio, row.paper_row(), fmt_or_na(row.paper_throughput()),
                 paper_ratio_text, has_ratio && paper_ratio ? fmt(100.0 * slowest_dense / s.median / *paper_ratio, 4) : "-",
                 std::to_string(shape_.layers), std::to_string(shape_.hidden), std::to_string(shape_.ffn),
                 std::to_string(shape_.heads), std::to_string(shape_.seq), std::to_string(shape_.vocab),
                 r.kind == Kind::dense ? "0" : std::to_string(shape_.experts), std::to_string(sequences_),
                 std::to_string(r.pp > 1 ? micro_ : 1),
                 expert_load_.count(r.describe()) ? fmt(expert_load_.at(r.describe()), 4) : "-"});
      std::printf("%-34s step %9.2f ms  %10.1f tokens/s/rank  speed ratio %-8s (paper: %s, %s tokens/s/GPU, %s)\n",
                  r.describe().c_str(), s.median, tput, ratio.c_str(), row.paper_row().c_str(),
                  fmt_or_na(row.paper_throughput()).c_str(), paper_ratio_text.c_str());
    }
    // 000's claim: PPMoE reaches at least 1.75x DPMoE's throughput (its large setting: rows 13 / 11).
    double ppmoe = 0, dpmoe = 0;
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      const std::string key = this->key(i);
      if (!ms.count(key)) continue;
      const double tput = tokens / (ms[key].median / 1e3) / W;
      if (rows_[i].layout.kind == Kind::ppmoe) ppmoe = std::max(ppmoe, tput);
      if (rows_[i].layout.kind == Kind::dpmoe) dpmoe = std::max(dpmoe, tput);
    }
    const double claim = paper_number("000.abstract.speedup_vs_moe");
    if (ppmoe > 0 && dpmoe > 0)
      std::printf("PPMoE / best DPMoE throughput: %.3f (PPMoE's (000) claim >= %.2f: %s; paper small setting %.2f, large %.2f; "
                  "results/REPORT.md judges it)\n",
                  ppmoe / dpmoe, claim, ppmoe / dpmoe >= claim ? "met" : "NOT met",
                  paper_number("000.t2.r6.throughput") / paper_number("000.t2.r4.throughput"),
                  paper_number("000.t2.r13.throughput") / paper_number("000.t2.r11.throughput"));
    t.write(ctx.opts.out_dir + "/ppmoe/t2.csv", ctx.provenance);
    return 0;
  }

 private:
  std::string key(std::size_t i) const { return "ppmoe_t2/" + std::to_string(i + 1) + "/" + rows_[i].layout.describe(); }

  // One row's ranks, communicators, stage, engine and optimizers, kept for its repetitions.
  GptTrainer& trainer(BenchContext& ctx, const ParallelLayout& r) {
    if (trainer_ && trainer_key_ == r.describe()) return *trainer_;
    trainer_.reset();
    trainer_ = std::make_unique<GptTrainer>(ctx.world, ctx.device, ctx.backend(), r, layout_model(shape_, r, ctx.dtype()),
                                            sequences_, micro_);
    trainer_key_ = r.describe();
    trainer_->step();  // warm-up: the pool and the libraries' first calls
    ctx.device.synchronize();
    return *trainer_;
  }

  void run(benchmark::State& st, BenchContext& ctx, const ParallelLayout& r) {
    GptTrainer& t = trainer(ctx, r);
    ctx.profile_begin();
    for (auto _ : st) ctx.time_iteration(st, t.stream(), [&] { t.step(); });
    ctx.profile_end();
    if (const auto load = expert_load(ctx.rt, t.expert_rows())) expert_load_[r.describe()] = *load;  // the last step's
  }

  std::optional<int> micro_opt_;
  std::vector<int> row_opt_;
  std::string layout_opt_;
  std::optional<int> dp_opt_, tp_opt_, pp_opt_;
  bool zero_ = false;
  int micro_ = 4, sequences_ = 8;
  ModelShape shape_;  // top-1, dropless, an MoE layer on every other FFN (000 Sec. 4.1)
  std::vector<Row> rows_;
  std::unique_ptr<GptTrainer> trainer_;
  std::string trainer_key_;
  std::map<std::string, double> expert_load_;  // by layout: the last step's expert rows, busiest / mean rank
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::LayoutsBench>(argc, argv); }
