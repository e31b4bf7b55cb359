// moebench_ppmoe_breakdown (ppmoe.t1, ppmoe.t3; PPMoE Tables 1 and 3): where a forward step of
// the MoE model goes, in DPMoE (DP = EP over every rank: the MoE layer's two all-to-alls, its
// gating, the rest) and in PPMoE (TP groups of up to 8 ranks: the MoE layer's gating, expert
// compute and all-reduce; the dense FFNs' compute and all-reduce). Every part is a breakdown
// range of the forward (NVTX ranges of the same names). Each repetition takes every part from one
// rank, the one whose forward was slowest, so the parts of a repetition add up to its total; a
// column is the median over the repetitions (with each one's value, _ms_reps), and its share the
// median of the repetitions' shares of their own total, with that median's confidence interval;
// and how routing spread the experts' work (the busiest rank's expert rows over the mean rank's),
// and whether each rank had a core (processors: where they share fewer, a rank's wait for a core
// lands in whichever part it was in, so the split is the machine's scheduling).
// Writes <out>/ppmoe/t1.csv and t3.csv.
#include <cstdio>
#include <map>
#include <optional>
#include "gpt/gpt_layout.h"
#include "harness/bench.h"
#include "models/paper_specs.h"
#include "models/paper_values.h"
#include "runtime/range.h"

namespace moebench {
namespace {

struct Column {
  std::string name;            // the CSV's and, with a paper value, the paper's
  std::vector<std::string> ranges;  // summed
  bool rest = false;           // total forward minus the MoE layers' forward
  bool in_paper = true;        // experiments/reference/values.csv holds 000.<table>.<name>.ms
};

// 000 Table 1 (DPMoE, 6.7B-to-143B) and Table 3 (PPMoE, small setting). The paper's FFN Fwd.
// holds the FFNs' all-reduce (Sec. 4.4: the all-reduce is 68.6% of it); ffn_gemms is ours, the
// FFNs' GEMMs alone.
const std::vector<Column> kTable1 = {{"total_fwd", {"model.fwd"}},          {"moe_fwd", {"moe.fwd"}},
                                     {"first_all_to_all", {"moe.dispatch"}}, {"second_all_to_all", {"moe.combine"}},
                                     {"gating", {"moe.gating"}},             {"others", {}, true}};
const std::vector<Column> kTable3 = {{"total_fwd", {"model.fwd"}},
                                     {"moe_fwd", {"moe.fwd"}},
                                     {"gating", {"moe.gating"}},
                                     {"expert_calc", {"moe.expert"}},
                                     {"moe_allreduce", {"moe.combine"}},
                                     {"ffn_fwd", {"ffn.fwd", "ffn.allreduce"}},
                                     {"ffn_allreduce", {"ffn.allreduce"}},
                                     {"ffn_gemms", {"ffn.fwd"}, false, false}};

double paper_ms(const std::string& table, const Column& c) { return paper_number("000." + table + "." + c.name + ".ms"); }

class BreakdownBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_ppmoe_breakdown"; }
  std::string description() const override {
    return "PPMoE Tables 1 and 3: the parts of a forward step of the MoE model in DPMoE (all-to-alls) and PPMoE (all-reduces).";
  }
  // A local forward step takes milliseconds: 21 rounds, so that a share's interval is its 7th to
  // 15th repetition rather than the two most disturbed ones.
  int repetitions_at(Scale s) const override { return s == Scale::local ? 21 : BenchProgram::repetitions_at(s); }
  void add_options(CLI::App& app) override {
    add_choices(app, "--tables", tables_, {"t1", "t3"}, "Which tables: t1 (DPMoE), t3 (PPMoE); default both");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    const int W = ctx.world.size();
    switch (ctx.scale()) {
      case Scale::tiny:
        shape_ = {.layers = 4, .hidden = 32, .ffn = 64, .heads = 4, .seq = 16, .vocab = 64, .experts = 8, .moe_every = 2};
        sequences_per_rank_ = 2;
        break;
      case Scale::local:
        shape_ = {.layers = 4, .hidden = 128, .ffn = 512, .heads = 4, .seq = 64, .vocab = 512, .experts = 8, .moe_every = 2};
        sequences_per_rank_ = 2;
        break;
      case Scale::paper:
        shape_ = model_spec("gpt3-medium").shape;
        sequences_per_rank_ = 1;
        break;
    }
    if (tables_.empty()) tables_ = {"t1", "t3"};
    for (const auto& t : tables_)
      if (auto e = validate_layout(layout(t, W), shape_, W)) return e;
    return std::nullopt;
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/ppmoe", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (const auto& t : tables_)
      ctx.add("ppmoe_" + t + "/" + layout(t, ctx.world.size()).describe(), 1,
              [this, &ctx, t](benchmark::State& st) { run(st, ctx, t); });
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>&) override {
    fixture_.reset();
    if (ctx.rt.rank() != 0) return 0;
    for (const auto& t : tables_) {
      if (!samples_.count(t)) continue;
      const auto& cols = t == "t1" ? kTable1 : kTable3;
      const auto& reps = samples_.at(t);
      std::vector<std::string> header = {"layout", "dp", "tp", "layers", "hidden", "ffn", "heads", "seq", "vocab",
                                         "experts", "sequences_per_rank"};
      for (const auto& c : cols)
        for (const char* suffix : {"_ms", "_ms_min", "_ms_max", "_ms_reps", "_percent", "_percent_min", "_percent_max",
                                   "_paper_ms", "_paper_percent"})
          header.push_back(c.name + suffix);
      header.push_back("expert_rows_max_over_mean");
      header.push_back("repetitions");
      CsvTable table(header);
      const ParallelLayout l = layout(t, ctx.world.size());
      std::vector<std::string> row = {l.describe(), std::to_string(l.dp),
                                      std::to_string(l.tp), std::to_string(shape_.layers), std::to_string(shape_.hidden),
                                      std::to_string(shape_.ffn), std::to_string(shape_.heads),
                                      std::to_string(shape_.seq), std::to_string(shape_.vocab),
                                      std::to_string(shape_.experts), std::to_string(sequences_per_rank_)};
      const double paper_total = paper_ms(t, cols[0]);
      const std::vector<double> totals = column(reps, 0);
      std::printf("%s %s:", t.c_str(), layout(t, ctx.world.size()).describe().c_str());
      for (std::size_t i = 0; i < cols.size(); ++i) {
        const std::vector<double> part = column(reps, i);
        const Spread s = spread_of(part);
        std::vector<double> shares;  // of each repetition's own total
        for (std::size_t k = 0; k < part.size(); ++k) shares.push_back(100 * part[k] / totals[k]);
        const MedianInterval share = median_interval(shares);
        const std::optional<double> paper = cols[i].in_paper ? std::optional(paper_ms(t, cols[i])) : std::nullopt;
        append(row, {fmt(s.median), fmt(s.min), fmt(s.max), repetitions_cell(part), fmt(share.median, 4),
                     fmt(share.lo, 4), fmt(share.hi, 4), fmt_or_na(paper),
                     fmt_or_na(paper ? std::optional(100 * *paper / paper_total) : std::nullopt, 4)});
        std::printf("  %s %.2f ms (%.1f%%", cols[i].name.c_str(), s.median, share.median);
        if (paper) std::printf("; paper %.1f%%", 100 * *paper / paper_total);
        std::printf(")");
      }
      const std::string load = load_.count(t) ? fmt(spread_of(load_.at(t)).median, 4) : "-";  // "-": no expert rows
      std::printf("  experts' rows busiest / mean rank %s\n", load.c_str());
      row.push_back(load);
      row.push_back(std::to_string(reps.size()));
      table.add_row(row);
      table.write(ctx.opts.out_dir + "/ppmoe/" + t + ".csv", ctx.provenance);
    }
    return 0;
  }

 private:
  // Table 1: DPMoE over every rank. Table 3: PPMoE inside TP groups of up to 8 (a node, as the
  // paper's TP = 8), data parallel over the rest (a forward step: DP adds no communication).
  static ParallelLayout layout(const std::string& table, int world) {
    if (table == "t1") return ParallelLayout::of(LayoutKind::dpmoe, world, 1, 1);
    const int tp = world <= 8 ? world : 8;
    return ParallelLayout::of(LayoutKind::ppmoe, world / tp, tp, 1);
  }
  static std::vector<double> column(const std::vector<std::vector<double>>& reps, std::size_t i) {
    std::vector<double> v;
    for (const auto& r : reps) v.push_back(r[i]);
    return v;
  }
  static void append(std::vector<std::string>& row, const std::vector<std::string>& more) {
    row.insert(row.end(), more.begin(), more.end());
  }

  struct Fixture {
    std::string table;
    LayoutGroups groups;
    std::unique_ptr<TrackingAllocator> alloc;
    std::unique_ptr<GptStage> stage;
    Buffer tokens, targets;
    int rows = 0;
  };

  Fixture& fixture(BenchContext& ctx, const std::string& t) {
    if (fixture_ && fixture_->table == t) return *fixture_;
    fixture_.reset();
    auto f = std::make_unique<Fixture>();
    f->table = t;
    const ParallelLayout l = layout(t, ctx.world.size());
    f->groups = make_layout_groups(ctx.world, l);
    f->alloc = std::make_unique<TrackingAllocator>(ctx.backend(), ctx.device.default_stream());
    const GptConfig m = layout_model(shape_, l, ctx.dtype());
    const Stream& s = ctx.device.default_stream();
    f->stage = std::make_unique<GptStage>(m, 0, 1, ctx.device, *f->alloc, l.tp > 1 ? f->groups.tp.get() : nullptr,
                                          layout_dispatcher(l, f->groups));
    f->stage->init(1, s);
    f->rows = sequences_per_rank_ * m.seq;
    f->tokens = synthetic_tokens(ctx.device, *f->alloc, s, f->rows, m.vocab, 7, f->groups.dp_rank);
    f->targets = synthetic_tokens(ctx.device, *f->alloc, s, f->rows, m.vocab, 8, f->groups.dp_rank);
    f->stage->set_batch({f->tokens.as<std::int32_t>()}, {f->targets.as<std::int32_t>()}, sequences_per_rank_,
                        1.f / float(f->rows));
    fixture_ = std::move(f);
    forward(ctx, nullptr);  // warm-up
    return *fixture_;
  }

  void forward(BenchContext& ctx, Breakdown* b) {
    Fixture& f = *fixture_;
    const Stream& s = ctx.device.default_stream();
    f.stage->zero_grad(s);
    f.stage->set_breakdown(b);
    f.stage->forward(0, nullptr, nullptr, f.rows, s);
    ctx.device.synchronize();
    f.stage->set_breakdown(nullptr);
  }

  void run(benchmark::State& st, BenchContext& ctx, const std::string& t) {
    fixture(ctx, t);
    const auto& cols = t == "t1" ? kTable1 : kTable3;
    ctx.profile_begin();
    for (auto _ : st) {
      Breakdown b;
      forward(ctx, &b);
      const auto totals = b.totals_ms();
      auto sum = [&](const std::vector<std::string>& names) {
        double ms = 0;
        for (const auto& n : names)
          if (auto it = totals.find(n); it != totals.end()) ms += it->second;
        return ms;
      };
      std::vector<double> rep;  // this rank's parts
      for (const Column& c : cols) rep.push_back(c.rest ? sum({"model.fwd"}) - sum({"moe.fwd"}) : sum(c.ranges));
      // Every part from the rank whose forward was slowest (the lowest such rank), so that the
      // parts add up to the total as they did on one rank: the slowest of each part apart would not.
      const double slowest = ctx.rt.max(rep[0]);
      const int W = ctx.world.size(), me = ctx.rt.rank();
      const int chosen = int(-ctx.rt.max(-double(rep[0] == slowest ? me : W)));
      if (me != chosen) std::fill(rep.begin(), rep.end(), 0.0);
      ctx.rt.sum(rep);
      samples_[t].push_back(rep);
      if (const auto load = expert_load(ctx.rt, fixture_->stage->expert_rows(0))) load_[t].push_back(*load);
      st.SetIterationTime(rep[0] / 1e3);
    }
    ctx.profile_end();
  }

  std::vector<std::string> tables_;
  ModelShape shape_;  // top-1, dropless, an MoE layer on every other FFN (000 Sec. 4.1)
  int sequences_per_rank_ = 2;
  std::map<std::string, std::vector<std::vector<double>>> samples_;  // per table: per repetition, per column
  std::map<std::string, std::vector<double>> load_;                   // per table: expert rows, busiest / mean rank
  std::unique_ptr<Fixture> fixture_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::BreakdownBench>(argc, argv); }
