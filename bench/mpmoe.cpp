// moebench_mpmoe (mpmoe.*): MPMoE's figures (003 Sec. 5) from the pipelined layer, the memory
// model, Algorithm 1 and the performance model, against FastMoE- and FasterMoE-style layers.
// For every layer shape (003 Table 3) and batch B per rank it runs, as the experiments ask:
//   f2  memory breakdown (model states with Adam / activations / buffers), measured beside
//       Eq. 1-3, the activations explained tensor by tensor (rank 0), and fragmentation;
//   f3  slowdown factors alpha(y, x) of the layer's own comm / comp / memcpy (the model's input);
//   f9  time over volume of comm, comp and memcpy with the piecewise-linear fits;
//   f10 MPMoE-pb (Algorithm 1 per strategy, then the best (n, S)) and MPMoE-pm (performance
//       model) against FastMoE-style (n = 1) and FasterMoE-style (g = 1) layers;
//   f11 peak memory of FastMoE, FasterMoE, PMoE and MPMoE, normalised to PMoE at the same n;
//   f12 achieved against Eq. 5's theoretical saving of activations (and Eq. 6's ratio);
//   f13 dispatch + recovery communication alone (sequential), FasterMoE-style g vs MPMoE n;
//   f14 PMoE's time over n = 1..8 with Algorithm 1's pick;
//   f15 time overhead of S1-S4 over PMoE at the n Algorithm 1 picks, and each selector's pick;
//   f16 breakdown of no tensor cores, seq(n = 1), seq(n = 6), MPMoE-pb, MPMoE-pm, and the
//       pipelined time against the ideal max(comm, comp) of seq(n);
//   f17 multi-node scaling (on a cluster only; elsewhere a row says why not);
//   pm  the model's prediction per operation (S, C, R, M) and end to end against every measured
//       token-split configuration;
//   layer  one configuration given by --split / --partitions / --strategy / --group-size.
// Times are the slowest rank's, medians over --iters iterations with min and max; memory the
// largest rank's peak per allocator tag. Writes <out>/mpmoe/<id>.csv; Algorithm 1's search is
// saved in --search-file and reused by later runs on the same backend, device, ranks, link and
// layer (unless --fresh-search).
#include <libfccp/csv.h>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include "moe/layer_runner.h"
#include "moe/mpmoe_calibration.h"
#include "harness/bench.h"
#include "models/mpmoe_memory.h"
#include "models/paper_specs.h"
#include "moe/granularity_search.h"

namespace moebench {
namespace {

const std::vector<std::string> kFigures = {"f2", "f3", "f9", "f10", "f11", "f12", "f13", "f14", "f15", "f16", "f17"};
const std::vector<MemoryReuse> kStrategies = {MemoryReuse::s1, MemoryReuse::s2, MemoryReuse::s3, MemoryReuse::s4};
constexpr double kIdealTarget = 0.90, kSavingTarget = 0.98, kPmTarget = 1.03, kPhaseErrorGoal = 0.10;

std::string config_key(const PipelineConfig& p, bool sequential) {
  return (sequential ? "seq " : "") + p.describe();
}
PipelineConfig tokens_split(int n, MemoryReuse s = MemoryReuse::none) {
  PipelineConfig p;
  p.partitions = n;
  p.reuse = s;
  return p;
}
PipelineConfig groups_split(int g) {
  PipelineConfig p;
  p.split = PipelineSplit::worker_groups;
  p.group_size = g;
  return p;
}

// Everything measured for one layer shape and batch.
struct CaseResult {
  std::string model;
  int tokens = 0;
  MoEConfig cfg;
  std::map<std::string, RunResult> runs;  // by config_key
  std::map<std::string, PipelineConfig> configs;
  std::optional<Calibration> cal;
  // MPMoE-pb
  std::map<MemoryReuse, int> pb_n;          // Algorithm 1's n per strategy
  std::map<MemoryReuse, double> pb_ms;      // its time at that n, as the search compared them
  PipelineConfig pb;
  double pb_search_ms = 0;
  int pb_points = 0;
  bool pb_saved = false;
  int f14_pick = 0;                         // Algorithm 1 over PMoE's measured times
  std::map<std::string, double> f12_worst, f12_theory;  // by config: the worst rank's achieved / Eq. 5; largest Eq. 5
  // MPMoE-pm
  std::optional<ModelPrediction> pm;
  // f2
  std::optional<RunResult> memory;
  std::optional<RunResult> no_tensor_cores;  // f16's first bar: seq(n = 1) with tensor cores off (cuda)
  std::map<std::string, double> explained;  // rank 0's activations, tensor by tensor
  std::map<std::string, double> explained_temporary, explained_buffers;  // ... its temporaries and comm buffers
  double rank0_activations = 0;
};

class MPMoEBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_mpmoe"; }
  std::string description() const override {
    return "MPMoE: pipelined MoE layer, memory reuse S1-S4, Algorithm 1 and the performance model (003 Figs. 2-17).";
  }
  void add_options(CLI::App& app) override {
    std::vector<std::string> all = kFigures;
    all.push_back("layer");
    add_choices(app, "--experiments", experiments_, all, "What to run (default: every figure, f2 .. f17)");
    add_choices(app, "--models", models_, {"gpt-s", "bert-l", "gpt-xl"},
                "003 Table 3 layers of the timed figures (default: by scale; the tiny scale uses a small layer of its own)");
    add_choices(app, "--memory-models", memory_models_, {"gpt-s", "bert-l", "gpt-xl"},
                "003 Table 3 layers of f2 (default: all three; the tiny scale uses its small layer)");
    add_wholes(app, "--tokens", tokens_, 1, 1 << 24, "Batches B per rank for the timed figures (default: by scale)");
    add_wholes(app, "--memory-tokens", memory_tokens_, 1, 1 << 24, "Batches B per rank for f2 (default: by scale)");
    add_whole(app, "--experts", experts_opt_, 1, 1 << 20, "Experts in the layer (default: one per rank, at least 4)");
    add_whole(app, "--top-k", top_k_opt_, 1, 1 << 10, "Experts per token (default 1)");
    add_path(app, "--search-file", search_file_,
             "Algorithm 1's saved search, read and written (default: <out>/mpmoe/granularity_search.csv)");
    app.add_flag("--fresh-search", fresh_search_, "Ignore the saved search (it is still written)");
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
      case Scale::tiny: tokens = {32, 64}; memory = {32, 64}; warmup_ = 1; iters_ = 2; break;
      case Scale::local: tokens = {512, 1024}; memory = {256, 1024, 2048}; warmup_ = 1; iters_ = 3; break;
      case Scale::paper:
        tokens = {2048, 4096, 8192, 16384, 32768};
        memory = {256, 512, 1024, 2048, 4096, 8192, 16384};
        warmup_ = 2; iters_ = 10;
        break;
    }
    warmup_ = ctx.opts.warmup.value_or(warmup_);
    iters_ = ctx.opts.iters.value_or(iters_);
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
    double biggest = 0, pinned = 0;
    for (const auto& s : shapes_) {
      const MoEConfig& c = s.moe;
      const double es = double(dtype_size(c.dtype));
      for (int B : tokens_) {
        const double rows = 2.0 * c.slots() * B;  // twice a balanced share, for skew
        const double weights = 4.0 * (c.experts / W) * double(c.hidden) * c.ffn * es;
        biggest = std::max(biggest, weights + rows * (6.0 * c.hidden + 2.0 * c.ffn) * es + 4.0 * B * c.hidden * es);
        if (offloads) pinned = std::max(pinned, rows * (c.hidden + c.ffn) * es);
      }
    }
    if (has("f2"))
      for (const auto& s : memory_shapes_) {
        const MoEConfig& c = s.moe;
        const double es = double(dtype_size(c.dtype));
        for (int B : memory_tokens_)
          biggest = std::max(biggest, 8.0 * (c.experts / W) * double(c.hidden) * c.ffn * 4 +
                                          2.0 * c.slots() * B * (6.0 * c.hidden + 2.0 * c.ffn) * es + 4.0 * B * c.hidden * es);
      }
    if (pinned > 0) {
      std::size_t free_b = 0, total_b = 0;
      detail::host_memory(&free_b, &total_b);
      const double share = double(free_b) / ctx.rt.local_size();
      if (pinned > 0.5 * share) {
        const std::string what = layer_only ? std::string("--strategy: ") + reuse_name(pipe_.reuse) + " offloads "
                                            : std::string("--tokens: the figures' S1-S3 offload ");
        return what + format_bytes(pinned) + " per rank to pinned host memory, and only " + format_bytes(share) +
               " is free per rank (half of it may be pinned); use fewer --tokens" + (layer_only ? " or S4 (no offload)" : "");
      }
    }
    if (auto e = ctx.check_fits(std::uint64_t(biggest), "--tokens/--memory-tokens/--models")) return e;
    if (search_file_.empty()) search_file_ = ctx.opts.out_dir + "/mpmoe/granularity_search.csv";
    if (has_any({"f10", "f14", "f15", "f16"}))
      if (auto e = load_searches(ctx)) return e;
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
    const std::string dir = ctx.opts.out_dir + "/mpmoe/";
    if (has("f2")) write_f2(ctx, dir);
    if (has("f3")) write_f3(ctx, dir);
    if (has("f9")) write_f9(ctx, dir);
    if (has("f10")) write_f10(ctx, dir);
    if (has("f11")) write_f11(ctx, dir);
    if (has("f12")) write_f12(ctx, dir);
    if (has("f13")) write_f13(ctx, dir);
    if (has("f14")) write_f14(ctx, dir);
    if (has("f15")) write_f15(ctx, dir);
    if (has("f16")) write_f16(ctx, dir);
    if (has("f17")) write_f17(ctx, dir);
    if (has_any({"f10", "f15", "f16"})) write_pm(ctx, dir);
    if (has("layer")) write_layer(ctx, dir);
    if (has_any({"f10", "f14", "f15", "f16"})) save_searches(ctx);
    return 0;
  }

 private:
  LayerShape shape_of(const BenchContext& ctx, const std::string& model, int experts) const {
    LayerShape s;
    s.model = model;
    MoEConfig& c = s.moe;
    if (model == "tiny") {
      c.hidden = 32;
      c.ffn = 64;
    } else {
      const MoELayerSpec& spec = moe_layer_spec(model);
      c.hidden = spec.hidden;
      c.ffn = spec.ffn;
    }
    c.experts = experts_opt_.value_or(experts);
    c.top_k = top_k_opt_.value_or(1);
    c.dtype = ctx.dtype();
    c.aux_loss = true;
    return s;
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

  static CaseResult& new_case(std::vector<CaseResult>& list, const LayerShape& shape, int B) {
    CaseResult& c = list.emplace_back();
    c.model = shape.model;
    c.tokens = B;
    c.cfg = shape.moe;
    return c;
  }

  void run_case(benchmark::State& st, BenchContext& ctx, const LayerShape& shape, int B) {
    for (auto _ : st) {
      const auto start = std::chrono::steady_clock::now();
      CaseResult& c = new_case(cases_, shape, B);
      LayerRunner r(ctx.env(), shape, B, streams_, *dispatch_comm_, *combine_comm_);
      const int W = ctx.world.size();
      if (has_any({"f3", "f9", "f10", "f15", "f16"})) c.cal = calibrate(r, 3);
      if (has_any({"f10", "f11", "f16"})) run(c, r, tokens_split(1));
      if (has_any({"f10", "f11"})) run(c, r, groups_split(1));
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
          if (W % g == 0) run(c, r, groups_split(g), true);
        for (int n : {1, 2, 4, 8}) run(c, r, tokens_split(n), true);
      }
      if (has_any({"f10", "f15", "f16"})) {
        search(ctx, c, r);
        run(c, r, c.pb);
        c.pm = choose(*c.cal, c.cfg, B, 2, 8, kStrategies);
        run(c, r, tokens_split(c.pm->n, c.pm->reuse));
      }
      if (has("f15"))
        for (MemoryReuse s : kStrategies) {
          run(c, r, tokens_split(c.pb_n[s], s));
          run(c, r, tokens_split(c.pb_n[s]));
        }
      if (has("f16")) {
        run(c, r, tokens_split(1), true);
        run(c, r, tokens_split(std::min(6, B)), true);
        run(c, r, c.pb, true);  // the ideal of each pipelined run: max(comm, comp) of its seq(n)
        run(c, r, tokens_split(c.pm->n, c.pm->reuse), true);
        if (ctx.backend() == Backend::cuda) {  // every GEMM in pedantic fp32 math, as the paper's first bar
          const bool was = ctx.device.tensor_cores();
          ctx.device.set_tensor_cores(false);
          c.no_tensor_cores = r.run(tokens_split(1), true, warmup_, iters_);
          ctx.device.set_tensor_cores(was);
        }
      }
      if (has("f14")) {  // Algorithm 1 over PMoE's measured times (the dashed line of Fig. 14)
        GranularitySearch& g = searches_[{shape.model, "PMoE"}];
        c.f14_pick = g.best(B, [&](int n) { return run(c, r, tokens_split(n)).median_ms(); });
      }
      if (has("layer")) run(c, r, pipe_);
      st.SetIterationTime(ctx.rt.max(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
    }
  }

  // MPMoE-pb: Algorithm 1 per strategy, then the best of the strategies' picks.
  void search(BenchContext& ctx, CaseResult& c, LayerRunner& r) {
    const auto start = std::chrono::steady_clock::now();
    for (MemoryReuse s : kStrategies) {
      GranularitySearch& g = searches_[{c.model, reuse_name(s)}];
      const int before = g.stats().profiled_points;
      const int n = g.best(c.tokens, [&](int parts) { return r.profile(tokens_split(parts, s)); });
      c.pb_points += g.stats().profiled_points - before;
      c.pb_saved = c.pb_saved || (g.stats().profiled_points == before && loaded_.count({c.model, reuse_name(s)}));
      c.pb_n[s] = n;
      const auto it = g.last_profile().find(n);
      c.pb_ms[s] = it != g.last_profile().end() ? it->second : r.profile(tokens_split(n, s));
    }
    MemoryReuse best = kStrategies.front();
    for (MemoryReuse s : kStrategies)
      if (c.pb_ms[s] < c.pb_ms[best]) best = s;
    c.pb = tokens_split(c.pb_n[best], best);
    c.pb_search_ms = ctx.rt.max(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }

  // f2: a training step's memory (Adam on), FastMoE-style (n = 1).
  void run_memory(benchmark::State& st, BenchContext& ctx, const LayerShape& shape, int B) {
    for (auto _ : st) {
      const auto start = std::chrono::steady_clock::now();
      CaseResult& c = new_case(memory_cases_, shape, B);
      LayerRunner r(ctx.env(), shape, B, streams_, *dispatch_comm_, *combine_comm_, /*adam=*/true);
      c.memory = r.run(tokens_split(1), false, 0, 1);  // peaks count bytes asked for: no warm-up needed
      explain(c, r);
      st.SetIterationTime(ctx.rt.max(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
    }
  }

  // This rank's activations at the end of forward (their peak with n = 1), tensor by tensor,
  // from the shapes and the step's routed counts: what Eq. 2 counts, and what it leaves out.
  void explain(CaseResult& c, LayerRunner& r) {
    const MoEConfig& cfg = r.layer().config();
    const RunResult& m = *c.memory;
    const double es = double(dtype_size(cfg.dtype)), B = r.tokens(), M = cfg.hidden, H = cfg.ffn, S = cfg.slots();
    const double E = cfg.experts, R = std::max(m.local_rows, 1.0), sent = std::max(m.local_sent_rows, 1.0);
    auto& x = c.explained;
    x["T_I"] = B * M * es;
    x["T_DI"] = R * M * es;
    x["T_M"] = R * H * es;
    x["T_DO"] = R * M * es;
    x["T_O"] = B * M * es;
    x["returned_rows"] = sent * M * es;  // the combine's received rows, kept for the gate's gradient
    x["routing"] = B * E * 4 + 3 * B * S * 4       // probabilities; expert, position, weight
                   + 3 * B * S * 4                 // their part slices
                   + B * S * 4                     // the row map
                   + (cfg.dtype == DType::f32 ? 0 : B * M * 4);  // the gate's fp32 input
    double sum = 0;
    for (const auto& [k, v] : x) sum += v;
    x["unexplained"] = m.local_peak[int(MemTag::activations)] - sum;
    c.rank0_activations = m.local_peak[int(MemTag::activations)];
    // Temporaries at their peak, inside the experts' backward: what Eq. 3 counts (the gradients
    // of T_DO, T_DI and T_M) and what it leaves out (the layer's input and output gradients, the
    // gate's, GeLU's output recomputed, the logits the routing keeps).
    auto& t = c.explained_temporary;
    t["dT_O_and_dT_I"] = 2 * B * M * es;
    t["dT_DO"] = R * M * es;
    t["dT_DI"] = R * M * es;
    t["dT_M"] = R * H * es;
    t["gelu_recomputed"] = R * H * es;
    t["gate_and_logits"] = B * S * 4 + B * E * 4;  // combine-weight gradients; the router's logits
    sum = 0;
    for (const auto& [k, v] : t) sum += v;
    t["unexplained"] = m.local_peak[int(MemTag::temporary)] - sum;
    // Communication buffers at their peak, the combine's backward exchange: its send and receive
    // rows, the row permutation, the counts and bases.
    auto& b = c.explained_buffers;
    b["send_and_receive"] = (sent + R) * M * es;
    b["maps_and_counts"] = R * 8 + 3 * E * 4;
    sum = 0;
    for (const auto& [k, v] : b) sum += v;
    b["unexplained"] = m.local_peak[int(MemTag::buffers)] - sum;
  }

  // ---- Algorithm 1's saved searches --------------------------------------------------------

  std::vector<std::string> search_key(const BenchContext& ctx, const LayerShape& s) const {
    return {backend_name(ctx.backend()), ctx.device.info().name, std::to_string(ctx.world.size()), ctx.world.link(),
            s.model, std::to_string(s.moe.hidden), std::to_string(s.moe.ffn), std::to_string(s.moe.experts),
            std::to_string(s.moe.top_k), ctx.opts.dtype};
  }

  static const std::vector<std::string>& search_columns() {
    static const std::vector<std::string> cols = {"search_backend", "search_device", "search_ranks", "search_link", "model",
                                                  "hidden", "ffn", "experts", "top_k", "search_dtype", "strategy", "kind",
                                                  "n", "b_floor", "b_ceil"};
    return cols;
  }
  // The saved search's rows (its own columns; the provenance after them is not read). Throws
  // on a file that is not one.
  static std::vector<std::vector<std::string>> read_search_file(const std::string& path) {
    const auto& c = search_columns();
    io::CSVReader<15, io::trim_chars<' '>, io::double_quote_escape<',', '"'>> in(path);
    in.read_header(io::ignore_extra_column, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12],
                   c[13], c[14]);
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> v(15);
    while (in.read_row(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14]))
      rows.push_back(v);
    return rows;
  }

  std::optional<std::string> load_searches(const BenchContext& ctx) {
    searches_.clear();
    loaded_.clear();
    if (fresh_search_ || !std::filesystem::exists(search_file_)) return std::nullopt;
    std::map<std::pair<std::string, std::string>, std::vector<GranularitySearch::Row>> rows;
    try {
      for (const auto& v : read_search_file(search_file_))
        for (const auto& s : shapes_)
          if (std::vector<std::string>(v.begin(), v.begin() + 10) == search_key(ctx, s)) {
            GranularitySearch::Row row{v[11], std::stoi(v[12]), 0, 0, 0};
            if (row.kind == "range") {
              row.floor = std::stod(v[13]);
              row.ceil = std::stod(v[14]);
            } else {
              row.b = std::stoi(v[13]);
            }
            rows[{v[4], v[10]}].push_back(row);
          }
    } catch (const std::exception& e) {
      return "--search-file: cannot read " + search_file_ + ": " + e.what() + " (use --fresh-search to start over)";
    }
    for (auto& [key, r] : rows) {
      GranularitySearch g;
      if (auto e = g.load(r)) return "--search-file: " + search_file_ + ": " + *e;
      searches_[key] = g;
      loaded_.insert(key);
    }
    return std::nullopt;
  }

  void save_searches(const BenchContext& ctx) {
    // The key columns are the search's own (the provenance columns after them are the run's
    // that last wrote the file).
    CsvTable t(search_columns());
    // Other layers' and machines' searches in the file stay; an unreadable file is replaced.
    if (std::filesystem::exists(search_file_)) {
      try {
        for (const auto& v : read_search_file(search_file_)) {
          bool mine = false;
          for (const auto& s : shapes_) mine = mine || std::vector<std::string>(v.begin(), v.begin() + 10) == search_key(ctx, s);
          if (!mine) t.add_row(v);
        }
      } catch (const std::exception&) {
      }
    }
    for (const auto& s : shapes_)
      for (const auto& [key, g] : searches_) {
        if (key.first != s.model) continue;
        for (const auto& row : g.rows()) {
          std::vector<std::string> v = search_key(ctx, s);
          v.push_back(key.second);
          v.push_back(row.kind);
          v.push_back(std::to_string(row.n));
          if (row.kind == "range") {
            for (double b : {row.floor, row.ceil}) v.push_back(std::isinf(b) ? "inf" : fmt(b, 12));
          } else {
            v.push_back(std::to_string(row.b));
            v.push_back("");
          }
          t.add_row(v);
        }
      }
    t.write(search_file_, ctx.provenance);
  }

  // ---- the CSVs ----------------------------------------------------------------------------

  static double min_of(const RunResult& r) { return *std::min_element(r.ms.begin(), r.ms.end()); }
  static double max_of(const RunResult& r) { return *std::max_element(r.ms.begin(), r.ms.end()); }
  static std::vector<std::string> timing(const RunResult& r) {
    return {fmt(r.median_ms()), fmt(min_of(r)), fmt(max_of(r))};
  }
  static const RunResult* find(const CaseResult& c, const PipelineConfig& p, bool sequential = false) {
    auto it = c.runs.find(config_key(p, sequential));
    return it == c.runs.end() ? nullptr : &it->second;
  }
  static void append(std::vector<std::string>& row, const std::vector<std::string>& more) {
    row.insert(row.end(), more.begin(), more.end());
  }

  void write_f2(BenchContext& ctx, const std::string& dir) {
    const std::vector<std::string> tensors = {"T_I", "T_DI", "T_M", "T_DO", "T_O", "returned_rows", "routing", "unexplained"};
    const std::vector<std::string> temps = {"dT_O_and_dT_I", "dT_DO", "dT_DI", "dT_M", "gelu_recomputed", "gate_and_logits",
                                            "unexplained"};
    const std::vector<std::string> bufs = {"send_and_receive", "maps_and_counts", "unexplained"};
    std::vector<std::string> cols = {"model", "tokens", "experts", "local_experts", "model_states_bytes", "activations_bytes",
                                     "buffers_bytes", "model_states_share", "activations_share", "buffers_share",
                                     "eq1_model_states_bytes", "eq2_activations_bytes", "eq3_buffers_bytes",
                                     "eq_model_states_share", "eq_activations_share", "eq_buffers_share",
                                     "rank0_activations_bytes"};
    for (const auto& t : tensors) cols.push_back("rank0_act_" + t + "_bytes");
    cols.push_back("rank0_temporary_bytes");
    for (const auto& t : temps) cols.push_back("rank0_tmp_" + t + "_bytes");
    cols.push_back("rank0_comm_buffers_bytes");
    for (const auto& t : bufs) cols.push_back("rank0_comm_" + t + "_bytes");
    append(cols, {"reserved_bytes", "fragmentation_bytes", "device_utilisation"});
    CsvTable t(cols);
    for (const CaseResult& c : memory_cases_) {
      const RunResult& m = *c.memory;
      // "buffers" is the paper's temporary buffers (our temporaries) and the communication buffers.
      const double states = m.peak[int(MemTag::model_states)], acts = m.peak[int(MemTag::activations)];
      const double bufs_all = m.peak[int(MemTag::buffers)] + m.peak[int(MemTag::temporary)], all = states + acts + bufs_all;
      const int W = ctx.world.size();
      // Eq. 1-3 in fp32 bytes, with this rank's experts (the paper's one per device).
      const MemoryModel eq = mpmoe_memory_model({double(c.tokens) * c.cfg.slots(), double(c.cfg.hidden), double(c.cfg.ffn),
                                                 double(c.cfg.experts), double(c.cfg.experts / W), 1});
      const double es = 4, e_all = (eq.model_states + eq.activations + eq.buffers) * es;
      std::vector<std::string> row = {c.model, std::to_string(c.tokens), std::to_string(c.cfg.experts),
                                      std::to_string(c.cfg.experts / W), fmt(states, 15), fmt(acts, 15), fmt(bufs_all, 15),
                                      fmt(states / all, 4), fmt(acts / all, 4), fmt(bufs_all / all, 4),
                                      fmt(eq.model_states * es, 15), fmt(eq.activations * es, 15), fmt(eq.buffers * es, 15),
                                      fmt(eq.model_states * es / e_all, 4), fmt(eq.activations * es / e_all, 4),
                                      fmt(eq.buffers * es / e_all, 4), fmt(c.rank0_activations, 15)};
      for (const auto& name : tensors) row.push_back(fmt(c.explained.at(name), 15));
      row.push_back(fmt(m.local_peak[int(MemTag::temporary)], 15));
      for (const auto& name : temps) row.push_back(fmt(c.explained_temporary.at(name), 15));
      row.push_back(fmt(m.local_peak[int(MemTag::buffers)], 15));
      for (const auto& name : bufs) row.push_back(fmt(c.explained_buffers.at(name), 15));
      append(row, {fmt(m.reserved, 15), fmt(std::max(0.0, m.reserved - m.peak_total), 15),
                   "n/a: no device utilisation counter on the " + std::string(backend_name(ctx.backend())) + " backend"});
      t.add_row(row);
      std::printf("f2  %-6s B=%-6d model states %5.1f%%  activations %5.1f%%  buffers %5.1f%%  (Eq. 1-3: %4.1f / %4.1f / %4.1f%%); "
                  "rank 0 unexplained: activations %.0f, temporaries %.0f, comm buffers %.0f bytes\n",
                  c.model.c_str(), c.tokens, 100 * states / all, 100 * acts / all, 100 * bufs_all / all,
                  100 * eq.model_states * es / e_all, 100 * eq.activations * es / e_all, 100 * eq.buffers * es / e_all,
                  c.explained.at("unexplained"), c.explained_temporary.at("unexplained"),
                  c.explained_buffers.at("unexplained"));
    }
    t.write(dir + "f2.csv", ctx.provenance);
  }

  void write_f3(BenchContext& ctx, const std::string& dir) {
    CsvTable t({"model", "tokens", "y", "x", "alpha", "y_alone_ms", "y_beside_x_ms", "overlap_pays"});
    for (const CaseResult& c : cases_) {
      if (!c.cal) continue;
      for (const auto& [yx, a] : c.cal->alpha.alpha) {
        const auto& [alone, with] = c.cal->alpha_ms.at(yx);
        t.add_row({c.model, std::to_string(c.tokens), yx.first, yx.second, fmt(a, 4), fmt(alone), fmt(with),
                   a > 0.5 ? "yes (alpha > 0.5)" : "no (alpha <= 0.5)"});
      }
    }
    t.write(dir + "f3.csv", ctx.provenance);
  }

  void write_f9(BenchContext& ctx, const std::string& dir) {
    CsvTable t({"model", "tokens", "op", "volume", "volume_unit", "measured_ms", "fitted_ms", "speed", "speed_unit",
                "fit_max_relative_residual", "breakpoints"});
    for (const CaseResult& c : cases_) {
      if (!c.cal) continue;
      const double M = c.cfg.hidden, H = c.cfg.ffn;
      for (const SpeedSample& s : c.cal->samples) {
        const bool rows = s.op.rfind("comp", 0) == 0;
        // GEMM FLOPs per row: forward 2 GEMMs, backward 4, the first GEMM alone 1.
        const double gemms = s.op == "comp_fwd" ? 2 : s.op == "comp_bwd" ? 4 : 1;
        const double speed = rows ? gemms * 2 * M * H * s.volume / (s.ms * 1e6) : s.volume / (s.ms * 1e6);
        const PiecewiseLinear& f = c.cal->fits.at(s.op);
        std::string knots;
        for (double k : f.breakpoints()) knots.append(knots.empty() ? "" : " ").append(fmt(k, 8));
        t.add_row({c.model, std::to_string(c.tokens), s.op, fmt(s.volume, 12), rows ? "rows" : "bytes", fmt(s.ms),
                   fmt(c.cal->time(s.op, s.volume)), fmt(speed, 5), rows ? "GFLOP/s" : "GB/s",
                   fmt(f.max_relative_residual(), 4), knots.empty() ? "none" : knots});
      }
    }
    t.write(dir + "f9.csv", ctx.provenance);
  }

  void write_f10(BenchContext& ctx, const std::string& dir) {
    std::vector<std::string> cols = {"model", "tokens", "label"};
    for (const char* w : {"fastmoe", "fastermoe", "pb", "pm"})
      for (const char* k : {"_ms", "_ms_min", "_ms_max"}) cols.push_back(std::string(w) + k);
    append(cols, {"pb_n", "pb_strategy", "pb_search_ms", "pb_profiled_points", "pb_search", "pm_n", "pm_strategy",
                  "pm_calibration_ms", "pb_over_fastermoe", "pm_over_fastermoe", "pb_over_fastmoe", "pm_over_fastmoe",
                  "paper_pb_over_fastermoe", "paper_pm_over_fastermoe", "paper_pb_over_fastmoe", "paper_pm_over_fastmoe",
                  "pm_time_over_pb", "pm_target", "pm_status"});
    CsvTable t(cols);
    for (const CaseResult& c : cases_) {
      const RunResult *fast = find(c, tokens_split(1)), *faster = find(c, groups_split(1)), *pb = find(c, c.pb);
      if (!fast || !faster || !pb || !c.pm) continue;
      const RunResult* pm = find(c, tokens_split(c.pm->n, c.pm->reuse));
      std::vector<std::string> row = {c.model, std::to_string(c.tokens), c.model + "(" + std::to_string(c.tokens) + ")"};
      for (const RunResult* r : {fast, faster, pb, pm}) append(row, timing(*r));
      const double q = pm->median_ms() / pb->median_ms();
      append(row, {std::to_string(c.pb.partitions), reuse_name(c.pb.reuse), fmt(c.pb_search_ms), std::to_string(c.pb_points),
                   c.pb_saved ? "saved search reused" : "searched", std::to_string(c.pm->n), reuse_name(c.pm->reuse),
                   fmt(c.cal->calibration_ms), fmt(faster->median_ms() / pb->median_ms(), 4),
                   fmt(faster->median_ms() / pm->median_ms(), 4), fmt(fast->median_ms() / pb->median_ms(), 4),
                   fmt(fast->median_ms() / pm->median_ms(), 4), "1.66", "1.55", "2.34", "2.20", fmt(q, 4), fmt(kPmTarget),
                   q <= kPmTarget ? "met" : "NOT met"});
      t.add_row(row);
      std::printf("f10 %-6s B=%-6d FastMoE %8.1f  FasterMoE %8.1f  pb (n=%d %s) %8.1f  pm (n=%d %s) %8.1f ms;  pb over FasterMoE "
                  "%.2fx (paper 1.66x), over FastMoE %.2fx (paper 2.34x); pm / pb %.3f (target <= 1.03: %s)\n",
                  c.model.c_str(), c.tokens, fast->median_ms(), faster->median_ms(), c.pb.partitions, reuse_name(c.pb.reuse),
                  pb->median_ms(), c.pm->n, reuse_name(c.pm->reuse), pm->median_ms(), faster->median_ms() / pb->median_ms(),
                  fast->median_ms() / pb->median_ms(), q, q <= kPmTarget ? "met" : "NOT met");
    }
    t.write(dir + "f10.csv", ctx.provenance);
  }

  void write_f11(BenchContext& ctx, const std::string& dir) {
    CsvTable t({"model", "tokens", "layer", "n", "strategy", "peak_bytes", "pmoe_peak_bytes", "normalised_to_pmoe",
                "reduction_vs_pmoe", "paper_reduction_vs_pmoe", "pinned_host_peak_bytes"});
    const std::map<int, std::string> paper = {{2, "0.23"}, {4, "0.34"}, {8, "0.38"}};
    for (const CaseResult& c : cases_) {
      const RunResult* pmoe4 = find(c, tokens_split(4));
      auto add = [&](const std::string& label, const RunResult* r, int n, MemoryReuse s, const RunResult* base) {
        if (!r) return;
        const bool has_base = base != nullptr;
        const double norm = has_base ? r->peak_total / base->peak_total : 0;
        t.add_row({c.model, std::to_string(c.tokens), label, std::to_string(n), reuse_name(s), fmt(r->peak_total, 15),
                   has_base ? fmt(base->peak_total, 15) : "n/a", has_base ? fmt(norm, 4) : "n/a",
                   has_base ? fmt(1 - norm, 4) : "n/a",
                   s != MemoryReuse::none && paper.count(n) ? paper.at(n) + " (average over models)" : "n/a",
                   fmt(r->pinned_peak, 15)});
      };
      add("FastMoE-style", find(c, tokens_split(1)), 1, MemoryReuse::none, pmoe4);
      add("FasterMoE-style g=1", find(c, groups_split(1)), ctx.world.size(), MemoryReuse::none, pmoe4);
      for (int n : {2, 4, 8}) {
        const RunResult* base = find(c, tokens_split(n));
        add("PMoE", base, n, MemoryReuse::none, base);
        for (MemoryReuse s : kStrategies) add("MPMoE", find(c, tokens_split(n, s)), n, s, base);
        if (!base) continue;
        double mean = 0;
        int k = 0;
        for (MemoryReuse s : kStrategies)
          if (const RunResult* r = find(c, tokens_split(n, s))) {
            mean += 1 - r->peak_total / base->peak_total;
            ++k;
          }
        if (k) std::printf("f11 %-6s B=%-6d n=%d: MPMoE peak memory %.1f%% below PMoE (paper: %s%% average)\n", c.model.c_str(),
                           c.tokens, n, 100 * mean / k, paper.at(n).substr(2).c_str());
      }
    }
    t.write(dir + "f11.csv", ctx.provenance);
  }

  void write_f12(BenchContext& ctx, const std::string& dir) {
    CsvTable t({"model", "tokens", "n", "strategy", "rows_largest_rank", "saved_activation_bytes_largest_rank",
                "eq5_saving_bytes_largest_rank", "achieved_over_theoretical_worst_rank", "target", "status", "paper_achieved",
                "phi_measured", "phi_eq6"});
    for (const CaseResult& c : cases_)
      for (int n : {2, 4, 8}) {
        const RunResult* base = find(c, tokens_split(n));
        if (!base) continue;
        for (MemoryReuse s : kStrategies) {
          const RunResult* r = find(c, tokens_split(n, s));
          const std::string key = config_key(tokens_split(n, s), false);
          if (!r || !c.f12_worst.count(key)) continue;
          const double saved = base->peak[int(MemTag::activations)] - r->peak[int(MemTag::activations)];
          const double theory = c.f12_theory.at(key), ratio = c.f12_worst.at(key);
          // Eq. 6 with this layer's model states as held here (weights and gradients).
          const double es = double(dtype_size(c.cfg.dtype));
          const MemoryModel eq = mpmoe_memory_model({base->rows, double(c.cfg.hidden), double(c.cfg.ffn),
                                                     double(c.cfg.experts), 1, n});
          const double phi_eq = 2 * theory / (base->peak[int(MemTag::model_states)] + 2 * eq.activations_pipe * es);
          const double phi = (base->peak_total - r->peak_total) / base->peak_total;
          t.add_row({c.model, std::to_string(c.tokens), std::to_string(n), reuse_name(s), fmt(base->rows, 12), fmt(saved, 15),
                     fmt(theory, 15), fmt(ratio, 4), fmt(kSavingTarget), ratio >= kSavingTarget ? "met" : "NOT met", "~0.95",
                     fmt(phi, 4), fmt(phi_eq, 4)});
          std::printf("f12 %-6s B=%-6d n=%d %s: achieved / theoretical saving %.3f on the worst rank (target >= %.2f: %s; "
                      "paper ~0.95)\n",
                      c.model.c_str(), c.tokens, n, reuse_name(s), ratio, kSavingTarget, ratio >= kSavingTarget ? "met" : "NOT met");
        }
      }
    t.write(dir + "f12.csv", ctx.provenance);
  }

  void write_f13(BenchContext& ctx, const std::string& dir) {
    CsvTable t({"model", "tokens", "layer", "granularity", "dispatch_recovery_ms", "dispatch_ms", "recovery_ms"});
    for (const CaseResult& c : cases_) {
      auto add = [&](const std::string& label, const std::string& g, const RunResult* r) {
        if (!r) return;
        const double d = r->range_ms.count("moe.a2a.dispatch") ? r->range_ms.at("moe.a2a.dispatch") : 0;
        const double rc = r->range_ms.count("moe.a2a.combine") ? r->range_ms.at("moe.a2a.combine") : 0;
        t.add_row({c.model, std::to_string(c.tokens), label, g, fmt(d + rc), fmt(d), fmt(rc)});
      };
      const int W = ctx.world.size();
      for (int g = 1; g <= W; ++g)
        if (W % g == 0) add("FasterMoE-style", "g=" + std::to_string(g), find(c, groups_split(g), true));
      for (int n : {1, 2, 4, 8}) add("MPMoE", "n=" + std::to_string(n), find(c, tokens_split(n), true));
    }
    t.write(dir + "f13.csv", ctx.provenance);
  }

  void write_f14(BenchContext& ctx, const std::string& dir) {
    CsvTable t({"model", "tokens", "n", "ms", "ms_min", "ms_max", "algorithm1_pick", "best_measured_n", "paper_gpt_xl_pick"});
    for (const CaseResult& c : cases_) {
      int best = 0;
      double best_ms = 0;
      for (int n = 1; n <= 8; ++n)
        if (const RunResult* r = find(c, tokens_split(n)); r && (best == 0 || r->median_ms() < best_ms)) {
          best = n;
          best_ms = r->median_ms();
        }
      if (!best) continue;
      const std::string paper = c.tokens < 8192 ? "2 (B < 8k)" : c.tokens <= 22528 ? "4 (8k-22k)" : "8 (B > 22k)";
      for (int n = 1; n <= 8; ++n)
        if (const RunResult* r = find(c, tokens_split(n))) {
          std::vector<std::string> row = {c.model, std::to_string(c.tokens), std::to_string(n)};
          append(row, timing(*r));
          append(row, {std::to_string(c.f14_pick), std::to_string(best), paper});
          t.add_row(row);
        }
      std::printf("f14 %-6s B=%-6d PMoE best n = %d (%.1f ms); Algorithm 1 picks n = %d (paper, GPT-XL: %s)\n", c.model.c_str(),
                  c.tokens, best, best_ms, c.f14_pick, paper.c_str());
    }
    t.write(dir + "f14.csv", ctx.provenance);
  }

  void write_f15(BenchContext& ctx, const std::string& dir) {
    CsvTable t({"ranks", "model", "tokens", "strategy", "n", "ms", "ms_min", "ms_max", "pmoe_ms", "overhead_vs_pmoe",
                "pb_pick", "pm_pick"});
    for (const CaseResult& c : cases_) {
      if (!c.pm) continue;
      for (MemoryReuse s : kStrategies) {
        const int n = c.pb_n.at(s);
        const RunResult *r = find(c, tokens_split(n, s)), *base = find(c, tokens_split(n));
        if (!r || !base) continue;
        std::vector<std::string> row = {std::to_string(ctx.world.size()), c.model, std::to_string(c.tokens), reuse_name(s),
                                        std::to_string(n)};
        append(row, timing(*r));
        append(row, {fmt(base->median_ms()), fmt(r->median_ms() / base->median_ms() - 1, 4),
                     c.pb.reuse == s ? "yes" : "", c.pm->reuse == s ? "yes" : ""});
        t.add_row(row);
      }
    }
    t.write(dir + "f15.csv", ctx.provenance);
  }

  void write_f16(BenchContext& ctx, const std::string& dir) {
    CsvTable t({"model", "tokens", "way", "comm_ms", "comp_ms", "mem_ms", "other_ms", "total_ms", "total_ms_min",
                "total_ms_max", "ideal_ms", "ideal_over_pipelined", "target", "status", "paper"});
    auto comm = [](const RunResult& r) { return r.comm_union_ms; };
    auto other = [](const RunResult& r) { return r.other_ms; };
    for (const CaseResult& c : cases_) {
      const int six = std::min(6, c.tokens);
      const RunResult *seq1 = find(c, tokens_split(1), true), *seq6 = find(c, tokens_split(six), true);
      if (!seq1 || !seq6 || !c.pm) continue;
      const std::string tensor_core_paper = "tensor cores: -26% (BERT-L), -23% (GPT-XL) end to end";
      if (!c.no_tensor_cores)
        t.add_row({c.model, std::to_string(c.tokens), "no TensorCore", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a",
                   "n/a", "n/a", "not measured: the cpu backend has no tensor cores to turn off", tensor_core_paper});
      // A pipelined run against its own seq(n): the ideal is max(comm, comp) of the parts run one
      // after another; the work the pipeline does not touch (gating, local permutations) is
      // taken out of both, as the paper leaves it out.
      auto add = [&](const std::string& way, const RunResult& r, const RunResult* seq, const std::string& paper = "") {
        std::vector<std::string> row = {c.model, std::to_string(c.tokens), way, fmt(comm(r)), fmt(r.busy_ms("C")),
                                        fmt(r.busy_ms("M")), fmt(other(r))};
        append(row, timing(r));
        if (!seq) {
          append(row, {"n/a", "n/a", "n/a", "n/a", paper});
          t.add_row(row);
          return;
        }
        const double ideal = std::max(comm(*seq), seq->busy_ms("C"));
        const double ratio = ideal / std::max(r.median_ms() - other(*seq), 1e-9);
        append(row, {fmt(ideal), fmt(ratio, 4), fmt(kIdealTarget), ratio >= kIdealTarget ? "met" : "NOT met",
                     "0.70 of max(comm, comp) of seq(n)"});
        t.add_row(row);
        std::printf("f16 %-6s B=%-6d %s: max(comm %.1f, comp %.1f) of seq(n) / (pipelined %.1f - other %.1f) = %.3f "
                    "(target >= %.2f: %s; paper 0.70)\n",
                    c.model.c_str(), c.tokens, way.c_str(), comm(*seq), seq->busy_ms("C"), r.median_ms(), other(*seq), ratio,
                    kIdealTarget, ratio >= kIdealTarget ? "met" : "NOT met");
      };
      if (c.no_tensor_cores) {
        add("no TensorCore", *c.no_tensor_cores, nullptr, tensor_core_paper);
        std::printf("f16 %-6s B=%-6d seq(n=1) with tensor cores / without: %.3f (paper: 0.74 BERT-L, 0.77 GPT-XL)\n",
                    c.model.c_str(), c.tokens, seq1->median_ms() / c.no_tensor_cores->median_ms());
      }
      add("seq(n=1)", *seq1, nullptr);
      add("seq(n=" + std::to_string(six) + ")", *seq6, nullptr, six == 6 ? "+12% (BERT-L), +4% (GPT-XL) over seq(n=1)" : "");
      const PipelineConfig pm = tokens_split(c.pm->n, c.pm->reuse);
      if (const RunResult* r = find(c, c.pb)) add("MPMoE-pb " + c.pb.describe(), *r, find(c, c.pb, true));
      if (const RunResult* r = find(c, pm)) add("MPMoE-pm " + pm.describe(), *r, find(c, pm, true));
    }
    t.write(dir + "f16.csv", ctx.provenance);
  }

  void write_f17(BenchContext& ctx, const std::string& dir) {
    CsvTable t({"nodes", "status"});
    const int nodes = ctx.rt.world() / std::max(1, ctx.rt.local_size());
    t.add_row({std::to_string(nodes),
               nodes > 1 ? "measured by experiments/mpmoe/f17.sh as throughput per node count: see f10.csv of each run"
                                  : "not measured here: all " + std::to_string(ctx.world.size()) +
                                        " ranks share one host, and multi-node scaling needs ranks on several nodes "
                                        "(experiments/mpmoe/f17.sh on a cluster)"});
    t.write(dir + "f17.csv", ctx.provenance);
  }

  // S and R run on two streams over one wire (one NIC, or the shared emulated link): a range
  // of one includes time waiting for the other's bytes, so their busy times are shown apart
  // but held against the model together, as the time some comm was in flight.
  void write_pm(BenchContext& ctx, const std::string& dir) {
    std::vector<std::string> cols = {"model", "tokens", "n", "strategy", "chosen_by", "S_predicted_ms", "S_measured_ms",
                                     "R_predicted_ms", "R_measured_ms"};
    for (const char* k : {"comm", "C", "M", "total"})
      for (const char* w : {"_predicted_ms", "_measured_ms", "_error"}) cols.push_back(std::string(k) + w);
    append(cols, {"goal_error", "status"});
    CsvTable t(cols);
    double worst = 0;
    for (const CaseResult& c : cases_) {
      if (!c.cal) continue;
      for (const auto& [key, r] : c.runs) {
        const PipelineConfig& p = c.configs.at(key);
        if (key.rfind("seq ", 0) == 0 || p.split != PipelineSplit::tokens) continue;
        const ModelPrediction m = predict(*c.cal, c.cfg, c.tokens, p.partitions, p.reuse);
        std::string chosen = c.pb.partitions == p.partitions && c.pb.reuse == p.reuse ? "pb" : "";
        if (c.pm && c.pm->n == p.partitions && c.pm->reuse == p.reuse) chosen += chosen.empty() ? "pm" : "+pm";
        std::vector<std::string> row = {c.model, std::to_string(c.tokens), std::to_string(p.partitions), reuse_name(p.reuse),
                                        chosen, fmt(m.busy_ms("S")), fmt(r.busy_ms("S")), fmt(m.busy_ms("R")),
                                        fmt(r.busy_ms("R"))};
        double case_worst = 0;
        const std::pair<double, double> kinds[3] = {{m.busy_ms("S") + m.busy_ms("R"), r.comm_union_ms},
                                                    {m.busy_ms("C"), r.busy_ms("C")},
                                                    {m.busy_ms("M"), r.busy_ms("M")}};
        for (const auto& [pred, meas] : kinds) {
          const double err = meas > 0 ? (pred - meas) / meas : 0;
          if (meas > 0) case_worst = std::max(case_worst, std::fabs(err));
          append(row, {fmt(pred), fmt(meas), meas > 0 ? fmt(err, 4) : "n/a"});
        }
        const double err = (m.total_ms - r.median_ms()) / r.median_ms();
        case_worst = std::max(case_worst, std::fabs(err));
        append(row, {fmt(m.total_ms), fmt(r.median_ms()), fmt(err, 4), fmt(kPhaseErrorGoal),
                     case_worst <= kPhaseErrorGoal ? "within goal" : "outside goal"});
        worst = std::max(worst, case_worst);
        t.add_row(row);
      }
    }
    if (t.rows())
      std::printf("pm  largest prediction error (comm, C, M, total) %.1f%% over %zu configurations (goal: within %.0f%%)\n",
                  100 * worst, t.rows(), 100 * kPhaseErrorGoal);
    t.write(dir + "pm.csv", ctx.provenance);
  }

  void write_layer(BenchContext& ctx, const std::string& dir) {
    CsvTable t({"model", "tokens", "layer", "ms", "ms_min", "ms_max", "S_ms", "C_ms", "R_ms", "M_ms", "peak_model_states_bytes",
                "peak_activations_bytes", "peak_buffers_bytes", "peak_temporary_bytes", "pinned_host_peak_bytes"});
    for (const CaseResult& c : cases_)
      if (const RunResult* r = find(c, pipe_)) {
        std::vector<std::string> row = {c.model, std::to_string(c.tokens), pipe_.describe()};
        append(row, timing(*r));
        for (const char* k : {"S", "C", "R", "M"}) row.push_back(fmt(r->busy_ms(k)));
        for (int tag = 0; tag < kMemTagCount; ++tag) row.push_back(fmt(r->peak[tag], 15));
        row.push_back(fmt(r->pinned_peak, 15));
        t.add_row(row);
        std::printf("layer %-6s B=%-6d %-22s %9.2f ms [%.2f .. %.2f]  peak %s\n", c.model.c_str(), c.tokens,
                    pipe_.describe().c_str(), r->median_ms(), min_of(*r), max_of(*r), format_bytes(r->peak_total).c_str());
      }
    t.write(dir + "layer.csv", ctx.provenance);
  }

  std::vector<std::string> experiments_, models_, memory_models_;
  std::vector<int> tokens_, memory_tokens_;
  std::optional<int> experts_opt_, top_k_opt_, partitions_opt_, group_opt_;
  std::string search_file_, split_, strategy_;
  bool fresh_search_ = false;
  PipelineConfig pipe_;
  std::vector<LayerShape> shapes_, memory_shapes_;
  int warmup_ = 1, iters_ = 3;
  std::unique_ptr<Communicator> dispatch_comm_, combine_comm_;
  PipelineStreams streams_;
  std::map<std::pair<std::string, std::string>, GranularitySearch> searches_;  // (model, strategy)
  std::set<std::pair<std::string, std::string>> loaded_;
  std::vector<CaseResult> cases_, memory_cases_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::MPMoEBench>(argc, argv); }
