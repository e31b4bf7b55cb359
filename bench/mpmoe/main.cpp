// moebench_mpmoe: MPMoE's figures (003 Sec. 5) from the pipelined layer, the memory model,
// Algorithm 1 and the performance model, against FastMoE- and FasterMoE-style layers. This file
// is the program (options, their checks, the cases it measures); the case records, Algorithm 1's
// saved searches and the figures' writers are beside it (cases.h, search_cache.h, figures.h).
// Its experiments (f2, f3, f9-f17, pm, layer) are described in docs/mpmoe.md, one row each.
// Times are the slowest rank's, medians over --iters iterations with min and max (the
// configurations a figure compares: over paired rounds, cases.h); memory the largest rank's peak
// per allocator tag. Writes <out>/mpmoe/<id>.csv; Algorithm 1's search is
// saved in --search-file and reused by later runs on the same backend, device, ranks, link and
// layer (unless --fresh-search).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cmath>
#include <map>
#include <optional>
#include "bench/mpmoe/cases.h"
#include "bench/mpmoe/figures.h"
#include "bench/mpmoe/search_cache.h"
#include "harness/bench.h"
#include "models/mpmoe_memory.h"
#include "models/paper_specs.h"
#include "moe/granularity_search.h"

namespace moebench::mpmoe {
namespace {

class MPMoEBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_mpmoe"; }
  std::string description() const override {
    return "MPMoE: pipelined MoE layer, memory reuse S1-S4, Algorithm 1 and the performance model (MPMoE Figs. 2-17).";
  }
  bool takes_iteration_counts() const override { return true; }
  void add_options(CLI::App& app) override {
    std::vector<std::string> all = kFigures;
    all.push_back("layer");
    add_choices(app, "--experiments", experiments_, all, "What to run (default: every figure, f2 .. f17)");
    add_choices(app, "--models", models_, {"gpt-s", "bert-l", "gpt-xl"},
                "MPMoE Table 3 layers of the timed figures (default: by scale; the tiny scale uses a small layer of its own)");
    add_choices(app, "--memory-models", memory_models_, {"gpt-s", "bert-l", "gpt-xl"},
                "MPMoE Table 3 layers of f2 (default: all three; the tiny scale uses its small layer)");
    add_wholes(app, "--tokens", tokens_, 1, 1 << 24, "Batches B per rank for the timed figures (default: by scale)");
    add_wholes(app, "--memory-tokens", memory_tokens_, 1, 1 << 24, "Batches B per rank for f2 (default: by scale)");
    add_whole(app, "--experts", experts_opt_, 1, 1 << 20, "Experts in the layer (default: one per rank, at least 4)");
    add_whole(app, "--top-k", top_k_opt_, 1, 1 << 10, "Experts per token (default 1)");
    add_real(app, "--lr", lr_opt_, above(0),
             "f2: AdamW's learning rate in the training step whose memory it measures (default 1e-4; moves no measured "
             "number)");
    add_path(app, "--search-file", search_file_,
             "Algorithm 1's saved search, read and written (default: <out>/mpmoe/granularity_search.csv)");
    add_flag(app, "--fresh-search", fresh_search_, "Ignore the saved search (it is still written)");
    add_choice(app, "--split", split_, {"tokens", "worker_groups"}, "--experiments layer: MPMoE's or FasterMoE's split (default tokens)");
    add_whole(app, "--partitions", partitions_opt_, 1, 1 << 24, "--experiments layer: parts n of the token split (default 4)");
    add_choice(app, "--strategy", strategy_, {"none", "S1", "S2", "S3", "S4"},
               "--experiments layer: memory reuse (none = PMoE; default S1)");
    add_whole(app, "--group-size", group_opt_, 1, 1 << 20, "--experiments layer: worker group size g of the FasterMoE-style split (default 1)");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    const int W = ctx.world.size();
    std::vector<int> tokens, memory;
    // One expert per rank, as the paper runs (64 on 64 GPUs, 16 on 16), and at least 4.
    const int experts = W * std::max(1, (4 + W - 1) / W);
    switch (ctx.scale()) {
      case Scale::tiny: tokens = {32, 64}; memory = {32, 64}; warmup_ = 1; iters_ = 2; rounds_ = 2; break;
      case Scale::local: tokens = {512, 1024}; memory = {256, 1024, 2048}; warmup_ = 1; iters_ = 3; rounds_ = 8; break;
      case Scale::paper:
        tokens = {2048, 4096, 8192, 16384, 32768};
        memory = {256, 512, 1024, 2048, 4096, 8192, 16384};
        warmup_ = 2; iters_ = 10; rounds_ = 10;
        break;
    }
    warmup_ = ctx.opts.warmup.value_or(warmup_);
    iters_ = ctx.opts.iters.value_or(iters_);
    rounds_ = ctx.opts.iters.value_or(rounds_);
    if (experiments_.empty()) experiments_ = kFigures;
    const bool layer_only = has("layer");
    for (const auto& [given, option] : {std::pair{bool(partitions_opt_), "--partitions"}, std::pair{!strategy_.empty(), "--strategy"},
                                        std::pair{!split_.empty(), "--split"}, std::pair{bool(group_opt_), "--group-size"}})
      if (given && !layer_only) return std::string(option) + ": only --experiments layer uses it; add layer to --experiments";
    if (!tokens_.empty()) tokens = tokens_;
    if (!memory_tokens_.empty()) memory = memory_tokens_;
    std::sort(tokens.begin(), tokens.end());
    tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
    tokens_ = tokens;
    if (has_any({"f3", "f9", "f10", "f11", "f12", "f13", "f14", "f15", "f16"}) && tokens_.front() < 8)
      return "--tokens: " + std::to_string(tokens_.front()) +
             " is fewer than the 8 parts the figures split a batch into (Algorithm 1 searches n up to 8); allowed: >= 8";
    memory_tokens_ = memory;
    const std::vector<std::string> all = {"gpt-s", "bert-l", "gpt-xl"};
    if (models_.empty()) models_ = ctx.scale() == Scale::tiny    ? std::vector<std::string>{"tiny"}
                                   : ctx.scale() == Scale::local ? std::vector<std::string>{"gpt-s"}
                                                                 : all;
    if (memory_models_.empty()) memory_models_ = ctx.scale() == Scale::tiny ? std::vector<std::string>{"tiny"} : all;
    shapes_.clear();
    memory_shapes_.clear();
    for (const auto& m : models_) shapes_.push_back(shape_of(ctx, m, experts));
    for (const auto& m : memory_models_) memory_shapes_.push_back(shape_of(ctx, m, experts));
    for (const auto& c : shapes_) {
      for (int B : tokens_)
        if (auto e = c.moe.validate(B, W)) return e;
      if (auto e = c.moe.validate_for(ctx.backend())) return e;
    }
    for (const auto& c : memory_shapes_)
      for (int B : memory_tokens_)
        if (auto e = c.moe.validate(B, W)) return e;
    // The single configuration.
    if (layer_only) {
      pipe_.split = split_ == "worker_groups" ? PipelineSplit::worker_groups : PipelineSplit::tokens;
      pipe_.partitions = partitions_opt_.value_or(4);
      pipe_.group_size = group_opt_.value_or(1);
      pipe_.reuse = *parse_reuse(strategy_.empty() ? (pipe_.split == PipelineSplit::tokens ? "S1" : "none") : strategy_);
      for (int B : tokens_)
        if (auto e = pipe_.validate(B, W)) return e;
    }
    // Pinned host memory for the offloading strategies: T_DI and T_M of a whole batch.
    const bool offloads = has_any({"f10", "f11", "f12", "f15", "f16"}) || (layer_only && pipe_.reuse != MemoryReuse::none &&
                                                                            pipe_.reuse != MemoryReuse::s4);
    const std::vector<LayerShape> none;
    if (auto e = check_memory(ctx, MemoryPlan{shapes_, tokens_, has("f2") ? memory_shapes_ : none, memory_tokens_, offloads,
                                              layer_only ? std::optional<MemoryReuse>(pipe_.reuse) : std::nullopt}))
      return e;
    if (search_file_.empty()) search_file_ = ctx.opts.out_dir + "/mpmoe/granularity_search.csv";
    searches_ = SearchCache(search_file_, fresh_search_);
    if (has_any({"f10", "f14", "f15", "f16"}))
      if (auto e = searches_.load(ctx, shapes_)) return e;
    return std::nullopt;
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    std::vector<OutputFolder> out = {{"--out", ctx.opts.out_dir + "/mpmoe", false}};
    const std::string folder = std::filesystem::path(search_file_).parent_path().string();
    if (!folder.empty() && folder != ctx.opts.out_dir + "/mpmoe") out.push_back({"--search-file", folder, false});
    return out;
  }

  void register_benchmarks(BenchContext& ctx) override {
    // The comms and streams every case shares: S and R on communicators of their own.
    dispatch_comm_ = ctx.world.dup();
    combine_comm_ = ctx.world.dup();
    streams_ = PipelineStreams{ctx.device.create_stream("compute"), ctx.device.create_stream("dispatch"),
                               ctx.device.create_stream("combine"), ctx.device.create_stream("copy")};
    if (has("f2"))
      for (const auto& s : memory_shapes_)
        for (int B : memory_tokens_)
          ctx.add("mpmoe/f2/" + s.model + "/B" + std::to_string(B), 1,
                  [this, &ctx, s, B](benchmark::State& st) { run_memory(st, ctx, s, B); }, benchmark::kMillisecond, 1);
    for (const auto& s : shapes_) {
      if (has_any({"f3", "f9", "f10", "f11", "f12", "f13", "f14", "f15", "f16", "layer"}))
        for (int B : tokens_)
          ctx.add("mpmoe/" + s.model + "/B" + std::to_string(B), 1,
                  [this, &ctx, s, B](benchmark::State& st) { run_case(st, ctx, s, B); }, benchmark::kMillisecond, 1);
    }
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    dispatch_comm_.reset();
    combine_comm_.reset();
    if (ctx.rt.rank() != 0) return 0;
    for (const RunRecord& r : runs)
      if (r.error) std::printf("%s: skipped: %s\n", r.name.c_str(), r.error_message.c_str());
    const Figures f{ctx, cases_, memory_cases_, pipe_, ctx.opts.out_dir + "/mpmoe/"};
    f.write_asked([this](const char* e) { return has(e); });
    if (has_any({"f10", "f14", "f15", "f16"})) searches_.save(ctx, shapes_);
    return 0;
  }

 private:
  LayerShape shape_of(const BenchContext& ctx, const std::string& model, int experts) const {
    return layer_shape(model, experts_opt_.value_or(experts), top_k_opt_.value_or(1), ctx.dtype());
  }

  bool has(const std::string& e) const { return std::find(experiments_.begin(), experiments_.end(), e) != experiments_.end(); }
  bool has_any(std::initializer_list<const char*> es) const {
    for (const char* e : es)
      if (has(e)) return true;
    return false;
  }

  // ---- measuring -------------------------------------------------------------------------

  const RunResult& run(CaseResult& c, LayerRunner& r, const PipelineConfig& p, bool sequential = false) {
    const std::string key = config_key(p, sequential);
    if (auto it = c.runs.find(key); it != c.runs.end()) return it->second;
    c.configs[key] = p;
    return c.runs[key] = r.run(p, sequential, warmup_, iters_);
  }

  void run_case(benchmark::State& st, BenchContext& ctx, const LayerShape& shape, int B) {
    for (auto _ : st) {
      const auto start = std::chrono::steady_clock::now();
      CaseResult& c = new_case(cases_, shape, B);
      LayerRunner r(ctx.env(), shape, B, streams_, *dispatch_comm_, *combine_comm_);
      const int W = ctx.world.size();
      if (has_any({"f3", "f9", "f10", "f15", "f16"})) c.cal = calibrate(r, 3);
      // What the figures compare with each other (f10, f13, f15, f16) is measured last, in paired
      // rounds; what the search, f11's and f12's peaks and f14 need at once, now.
      PairedRounds paired;
      auto pair = [&](const PipelineConfig& p, bool sequential = false) { paired.add(c, p, sequential); };
      if (has("f10")) {
        pair(tokens_split(1)), pair(groups_split(1));
      } else {
        if (has_any({"f11", "f16"})) run(c, r, tokens_split(1));
        if (has("f11")) run(c, r, groups_split(1));
      }
      if (has("f14"))
        for (int n = 1; n <= std::min(8, B); ++n) run(c, r, tokens_split(n));
      if (has_any({"f11", "f12"}))
        for (int n : {2, 4, 8}) {
          run(c, r, tokens_split(n));
          for (MemoryReuse s : kStrategies) run(c, r, tokens_split(n, s));
        }
      if (has("f12"))  // each rank's saving against Eq. 5 for its own rows; the worst rank's ratio
        for (int n : {2, 4, 8})
          for (MemoryReuse s : kStrategies) {
            const RunResult& base = run(c, r, tokens_split(n));
            const RunResult& mine = run(c, r, tokens_split(n, s));
            const double es = double(dtype_size(c.cfg.dtype));
            const double theory = es * mpmoe_memory_model({base.local_rows, double(c.cfg.hidden), double(c.cfg.ffn),
                                                           double(c.cfg.experts), 1, n}).saving_activations;
            const int a = int(MemTag::activations);
            const double ratio = theory > 0 ? (base.local_peak[a] - mine.local_peak[a]) / theory : 1.0;
            c.f12_worst[config_key(tokens_split(n, s), false)] = -ctx.rt.max(-ratio);
            c.f12_theory[config_key(tokens_split(n, s), false)] = ctx.rt.max(theory);
          }
      if (has("f13")) {
        for (int g = 1; g <= W; ++g)
          if (W % g == 0) pair(groups_split(g), true);
        for (int n : {1, 2, 4, 8}) pair(tokens_split(n), true);
      }
      if (has_any({"f10", "f15", "f16"})) {
        search_pb(ctx.rt, searches_, c, r);
        c.pm = choose(*c.cal, c.cfg, B, 2, 8, kStrategies);
        pair(c.pb);
        pair(tokens_split(c.pm->n, c.pm->reuse));
      }
      if (has("f15"))
        for (MemoryReuse s : kStrategies) pair(tokens_split(c.pb_n[s], s)), pair(tokens_split(c.pb_n[s]));
      if (has("f16")) {
        pair(tokens_split(1), true);
        pair(tokens_split(std::min(6, B)), true);
        pair(c.pb, true);  // the ideal of each pipelined run: max(comm, comp) of its seq(n)
        pair(tokens_split(c.pm->n, c.pm->reuse), true);
        if (ctx.backend() == Backend::cuda) {  // every GEMM in pedantic fp32 math, as the paper's first bar
          const bool was = ctx.device.tensor_cores();
          ctx.device.set_tensor_cores(false);
          c.no_tensor_cores = r.run(tokens_split(1), true, warmup_, iters_);
          ctx.device.set_tensor_cores(was);
        }
      }
      if (has("f14")) {  // Algorithm 1 over PMoE's measured times (the dashed line of Fig. 14)
        GranularitySearch& g = searches_.search(shape.model, "PMoE");
        c.f14_pick = g.best(B, [&](int n) { return run(c, r, tokens_split(n)).median_ms(); });
      }
      if (has("layer")) run(c, r, pipe_);
      paired.run(c, r, warmup_, rounds_);
      st.SetIterationTime(ctx.rt.max(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
    }
  }

  // f2: a training step's memory (Adam on), FastMoE-style (n = 1).
  void run_memory(benchmark::State& st, BenchContext& ctx, const LayerShape& shape, int B) {
    for (auto _ : st) {
      const auto start = std::chrono::steady_clock::now();
      CaseResult& c = new_case(memory_cases_, shape, B);
      AdamStep adam;
      adam.lr = float(lr_opt_.value_or(1e-4));
      LayerRunner r(ctx.env(), shape, B, streams_, *dispatch_comm_, *combine_comm_, adam);
      c.memory = r.run(tokens_split(1), false, 0, 1);  // peaks count bytes asked for: no warm-up needed
      explain(c, r);
      st.SetIterationTime(ctx.rt.max(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
    }
  }

  std::vector<std::string> experiments_, models_, memory_models_;
  std::vector<int> tokens_, memory_tokens_;
  std::optional<int> experts_opt_, top_k_opt_, partitions_opt_, group_opt_;
  std::optional<double> lr_opt_;
  std::string search_file_, split_, strategy_;
  bool fresh_search_ = false;
  PipelineConfig pipe_;
  std::vector<LayerShape> shapes_, memory_shapes_;
  int warmup_ = 1, iters_ = 3, rounds_ = 8;  // rounds_: of the paired configurations (8 drop the extremes)
  std::unique_ptr<Communicator> dispatch_comm_, combine_comm_;
  PipelineStreams streams_;
  SearchCache searches_;
  std::vector<CaseResult> cases_, memory_cases_;
};

}  // namespace
}  // namespace moebench::mpmoe

int main(int argc, char** argv) { return moebench::bench_main<moebench::mpmoe::MPMoEBench>(argc, argv); }
