// moebench_moe_layer: forward + backward of one MoE layer per dispatcher (single-rank
// reference, expert parallel = DPMoE, PPMoE), with the breakdown ranges moe.gating,
// moe.dispatch, moe.expert, moe.combine and their backward -- the single-layer analogue of
// PPMoE Tables 1 and 3 -- and the overhead ratio: layer time over the time of its expert
// GEMMs alone on the same routed rows (target <= 1.15), taken iteration by iteration inside
// each repetition and reported as median and spread. Load statistics are over every rank's
// tokens, which --popularity can steer to a skewed expert popularity (moe/routing_workload.h;
// the row records the busiest expert's load over the mean). The local row's speed_vs_torch
// holds PyTorch's layer (experiments/moe/torch_layer.py, --reference) against ours; each row
// carries its roofline (models/roofline.h) from --roofline-profile. Writes
// <out>/moe/layer_<dispatcher>.csv; --kernels as many iterations more, op by op, into
// kernels_<dispatcher>.csv (rank 0's); --dump DIR writes the state of the last real forward +
// backward as .npy (tests/cli/check_dump.py recomputes it independently).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <thread>
#include "bench/moe_layer_csv.h"
#include "bench/moe_options.h"
#include "harness/bench.h"
#include "harness/kernel_table.h"
#include "harness/layer_case.h"
#include "harness/torch_reference.h"
#include "models/expert_split.h"
#include "models/layout.h"
#include "models/paper_specs.h"
#include "models/roofline.h"
#include "moe/dispatcher_table.h"

namespace moebench {
namespace {

class MoELayerBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_moe_layer"; }
  std::string description() const override {
    return "One MoE layer, forward + backward, per dispatcher (" + dispatcher_list() + "), with its time breakdown.";
  }
  bool takes_iteration_counts() const override { return true; }
  void add_options(CLI::App& app) override {
    moe_.add(app);
    add_choices(app, "--dispatchers", dispatchers_, dispatcher_names(),
                "Dispatchers to run (default: all; with --expert-gemm segmented, " +
                    dispatcher_list([](const DispatcherRow& row) { return !row.needs_host_counts; }) + ")");
    add_whole(app, "--tp", tp_opt_, 1, 1 << 20, "PPMoE tensor-parallel group size (default: all ranks)");
    add_path(app, "--dump", dump_dir_, "Write each layer's input, weights, routing, output and gradients as .npy here");
    add_text(app, "--popularity", popularity_text_, "POPULARITY",
             "Experts' popularity the tokens steer the gate to: natural (as drawn), uniform, zipf:S, hot:F "
             "(default natural)");
    add_path(app, "--reference", reference_path_,
             "PyTorch's layer (experiments/moe/torch_layer.py's CSV) at the same sizes and popularity, for speed_vs_torch");
    add_flag(app, "--kernels", kernels_,
             "Also run as many iterations as repetitions op by op (on cuda every kernel, copy and memset, through "
             "CUPTI) into moe/kernels_<dispatcher>.csv, each under the range that launched it");
    add_path(app, "--roofline-profile", roofline_path_,
             "This device's profile (moebench_profile's CSV) for the roofline columns; none: they are n/a");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    MoEConfig d;
    int tokens = 0;
    switch (ctx.scale()) {
      case Scale::tiny: d.hidden = 64; d.ffn = 256; d.experts = 8; tokens = 128; warmup_ = 1; iters_ = 3; break;
      case Scale::local: d.hidden = 768; d.ffn = 3072; d.experts = 16; tokens = 4096; warmup_ = 1; iters_ = 2; break;
      case Scale::paper: {  // the MoE layer of 000's GPT-3 Medium model, 4 sequences per rank
        const ModelSpec m = model_spec("gpt3-medium");
        d.hidden = m.shape.hidden; d.ffn = m.shape.ffn; d.experts = m.shape.experts; tokens = 4 * m.shape.seq; warmup_ = 3; iters_ = 10;
        break;
      }
    }
    warmup_ = ctx.opts.warmup.value_or(warmup_);
    iters_ = ctx.opts.iters.value_or(iters_);
    const int world = ctx.world.size();
    // segmented keeps the counts on the device: no exchange sized on the host.
    if (auto e = pick_dispatchers(dispatchers_, parse_expert_gemm(moe_.expert_gemm) == ExpertGemm::segmented)) return e;
    const bool grouped = std::any_of(dispatchers_.begin(), dispatchers_.end(),
                                     [](const std::string& d) { return dispatcher_row(d).shares_tokens(); });
    if (tp_opt_ && !grouped)
      return "--tp: only a dispatcher whose experts split over a TP group uses it (" +
             dispatcher_list([](const DispatcherRow& row) { return row.shares_tokens(); }) +
             "); add one to --dispatchers or drop --tp";
    tp_ = tp_opt_.value_or(world);
    if (world % tp_ != 0)
      return "--tp: '" + std::to_string(tp_) + "' does not divide the " + std::to_string(world) +
             " ranks; allowed: a divisor of the number of ranks";
    // PPMoE's tensor-parallel groups, and the data-parallel replicas they form, from the one layout.
    if (auto e = ParallelLayout::make(world, tp_, 1, 1, &layout_)) return e;
    // The layer's config resolved and checked once; then each dispatcher's experts over its group.
    if (auto e = moe_.resolve(d, tokens, ctx.dtype(), ctx.backend(), 1)) return e;
    for (const auto& name : dispatchers_) {
      const DispatcherRow& row = dispatcher_row(name);
      const int group = row.expert_ranks(world, tp_);
      if (auto e = expert_split_error(moe_.config.experts, group, row.shares_tokens() ? "the --tp group" : "")) return e;
    }
    if (auto e = parse_popularity("--popularity", popularity_text_, &popularity_)) return e;
    if (auto e = read_reference(ctx)) return e;
    try {
      roofline_ = load_roofline_profile("--roofline-profile", roofline_path_, ctx.provenance.backend, ctx.provenance.device,
                                        std::string(dtype_name(ctx.dtype())),
                                        world, int(std::thread::hardware_concurrency()));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    const MoEConfig& c = moe_.config;
    const double es = double(dtype_size(c.dtype));
    // all experts (the local reference holds them all), weights + gradients, and rows for twice a balanced load
    const double weights = 4.0 * c.experts * c.hidden * double(c.ffn) * es;
    const double rows = 2.0 * moe_.resolved_tokens * c.slots();
    const double acts = rows * (4.0 * c.hidden + 3.0 * c.ffn) * es + 4.0 * moe_.resolved_tokens * c.experts * 4 +
                        8.0 * moe_.resolved_tokens * c.hidden * es;
    return ctx.check_fits(std::uint64_t(weights + acts), "--experts/--hidden/--ffn/--tokens");
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    std::vector<OutputFolder> out = {{"--out", ctx.opts.out_dir + "/moe", false}};
    if (!dump_dir_.empty())
      for (const auto& d : dispatchers_) out.push_back({"--dump", dump_dir_ + "/" + d, true});
    return out;
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (const auto& d : dispatchers_)
      ctx.add("moe_layer/" + d, iters_, [this, &ctx, d](benchmark::State& st) { run(st, ctx, d); });
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    // --kernels: iterations of their own after every measured one (CUPTI, once attached, can cost
    // none of them), on every rank, for each dispatcher measured: the live layer first.
    std::vector<std::string> order = kernels_ ? dispatchers_ : std::vector<std::string>{};
    std::stable_partition(order.begin(), order.end(), [&](const auto& d) { return fixture_ && fixture_->dispatcher == d; });
    for (const auto& d : order)
      if (measured_.count(d)) log_kernels(ctx, d);
    fixture_.reset();
    if (ctx.rt.rank() != 0) return 0;
    for (const RunRecord& r : runs) {
      const std::string d = r.name.substr(r.name.find('/') + 1);
      if (r.error) {
        std::printf("moe_layer/%s: skipped: %s\n", d.c_str(), r.error_message.c_str());
        continue;
      }
      write_kernels(ctx, d, r.time_ms().median);
      write_layer_csv(ctx.opts.out_dir, ctx.provenance, r,
                      LayerCsvRun{d, moe_, popularity_.text, roofline_, torch_, !reference_path_.empty()});
    }
    return 0;
  }

 private:
  std::unique_ptr<TokenDispatcher> make(BenchContext& ctx, const std::string& d, const DispatcherEnv& env) {
    const DispatcherRow& row = dispatcher_row(d);
    Communicator* group = &ctx.world;
    if (row.shares_tokens()) {
      const int r = ctx.world.rank();
      if (!tp_comm_) tp_comm_ = ctx.world.split(layout_.tp_color(r), layout_.tp_index(r));
      group = tp_comm_.get();
    }
    return row.make(env, group);
  }

  // The fastest PyTorch variant that ran, at our sizes and popularity; none without --reference.
  std::optional<std::string> read_reference(const BenchContext& ctx) {
    if (reference_path_.empty()) return std::nullopt;
    const MoEConfig& c = moe_.config;
    if (c.capacity_factor || c.prototypes != 1)
      return "--reference: PyTorch's layer (torch_layer.py) is dropless plain top-k; drop --reference, or "
             "--capacity-factor and --prototypes";
    auto layer = [](const std::string& tokens, const std::string& h, const std::string& f, const std::string& e,
                    const std::string& k, const std::string& popularity) {
      return tokens + " tokens, h " + h + ", f " + f + ", " + e + " experts, top-" + k + ", " + popularity;
    };
    const std::string ours = layer(std::to_string(moe_.resolved_tokens), std::to_string(c.hidden), std::to_string(c.ffn),
                                   std::to_string(c.experts), std::to_string(c.top_k), popularity_.text);
    std::map<std::string, TorchRun> fastest;
    auto e = read_torch_csv({reference_path_, "ms", "", ""}, ctx.dtype(), [&](const TorchRun& r) -> std::optional<std::string> {
      const std::string theirs = layer(r.cell("tokens"), r.cell("hidden"), r.cell("ffn"), r.cell("experts"), r.cell("top_k"),
                                       r.cell("popularity"));
      if (theirs == ours) return std::nullopt;
      return "another layer (" + theirs + "; ours: " + ours + "); run torch_layer.py with the same sizes and --popularity";
    }, &fastest);
    if (!e && fastest.count("")) torch_ = fastest[""];
    return e;
  }

  // PPMoE ranks of one TP group hold the same tokens; otherwise every rank has its own.
  int token_block(const BenchContext& ctx, const std::string& d) const {
    return dispatcher_row(d).shares_tokens() ? layout_.dp_index(ctx.world.rank()) : ctx.world.rank();
  }

  LayerCase& fixture(BenchContext& ctx, const std::string& d) {
    if (fixture_ && fixture_->dispatcher == d) return *fixture_;
    fixture_.reset();  // one layer alive at a time
    const LayerInputs in{moe_.resolved_tokens, moe_.resolved_seed, token_block(ctx, d), popularity_, warmup_};
    fixture_ = make_layer_case(d, moe_.config, ctx.device, [&](const DispatcherEnv& env) { return make(ctx, d, env); }, in);
    return *fixture_;
  }

  void log_kernels(BenchContext& ctx, const std::string& d) {
    LayerCase& f = fixture(ctx, d);
    const Stream& s = ctx.device.default_stream();
    // zero_grad as in the timed iterations, unlogged: the weight gradients overwritten, not added to.
    kernel_logs_[d] = log_kernel_runs(
        ctx.device, ctx.repetitions(),
        [&](Breakdown& b) {
          MoEContext mb = f.layer->forward(f.x.data(), moe_.resolved_tokens, f.y.data(), s, &b);
          f.layer->backward(mb, f.dy.data(), f.dx.data(), s, &b);
        },
        [&] { f.layer->zero_grad(s); });
  }

  // moe/kernels_<d>.csv: rank 0's ops of the logged iterations per range and kernel, slowest first.
  // measured_ms: the measured iterations' median, which a logged one's span is set against.
  void write_kernels(BenchContext& ctx, const std::string& d, double measured_ms) const {
    const auto log = kernel_logs_.find(d);
    if (log == kernel_logs_.end()) return;
    const MoEConfig& c = moe_.config;
    CsvTable t(kernel_table_columns({"dispatcher"}, "iteration", {"expert_gemm", "gate_kernels", "tokens_per_rank", "hidden",
                                                                 "ffn", "experts", "top_k", "popularity"}));
    add_kernel_rows(t, log->second, {d}, {moe_.expert_gemm, moe_.gate_kernels_ran, std::to_string(moe_.resolved_tokens),
                                         std::to_string(c.hidden), std::to_string(c.ffn), std::to_string(c.experts),
                                         std::to_string(c.top_k), popularity_.text});
    t.write(ctx.opts.out_dir + "/moe/kernels_" + d + ".csv", ctx.provenance);
    std::printf("moe_layer/%-16s %s\n", d.c_str(), slowest_kernels(log->second).c_str());
    std::printf("moe_layer/%-16s %s\n", d.c_str(), logged_against_measured(log->second, measured_ms).c_str());
  }

  void run(benchmark::State& st, BenchContext& ctx, const std::string& d) {
    LayerCase& f = fixture(ctx, d);
    measured_.insert(d);
    if (!scratch_) scratch_ = std::make_unique<TrackingAllocator>(ctx.backend(), ctx.device.default_stream());
    MoELayer& layer = *f.layer;
    const int T = moe_.resolved_tokens;
    const Stream& s = ctx.device.default_stream();
    std::map<std::string, double> range_ms;
    double total_ms = 0, gemm_ms = 0;
    ctx.profile_begin();
    for (auto _ : st) {
      Breakdown b;
      f.last.reset();              // one micro-batch alive at a time, as the layer is measured
      layer.zero_grad(s);          // untimed: the gradients are this step's alone (the dump holds them)
      total_ms += ctx.time_iteration(st, s, [&] {
        f.last = layer.forward(f.x.data(), T, f.y.data(), s, &b);
        layer.backward(*f.last, f.dy.data(), f.dx.data(), s, &b);
      });
      const auto totals = b.totals_ms();
      std::vector<double> mine;
      for (const auto& n : kLayerRanges) mine.push_back(totals.count(n) ? totals.at(n) : 0.0);
      const PhasesOverRanks phases = phases_over_ranks(ctx.rt, mine);
      for (std::size_t i = 0; i < kLayerRanges.size(); ++i) {
        const std::string& name = kLayerRanges[i];
        range_ms[name] += phases.slowest_rank[i];
        if (std::count(kExchangeRanges.begin(), kExchangeRanges.end(), name))
          range_ms[name + kFastestRank] += phases.fastest_rank[i];
      }
      // The same expert GEMMs alone, right after, on the rows this step routed (not in the manual time).
      gemm_ms += ctx.time_ms(s, [&] { layer.experts().gemms_only(f.last->experts, *scratch_, s); });
    }
    ctx.profile_end();
    layer.read_counts(*f.last, s);  // the counts of the last step, after its timing
    if (!dump_dir_.empty() && !f.dumped) {
      dump(ctx, d, f);
      f.dumped = true;
    }
    const double n = double(st.iterations());
    for (const auto& [name, ms] : range_ms) st.counters[name] = ms / n;
    st.counters["expert_gemms_ms"] = gemm_ms / n;
    st.counters["overhead_ratio"] = total_ms / gemm_ms;
    // The ranks of one TP group hold the same tokens: one of them counts them.
    const bool counts = !dispatcher_row(d).shares_tokens() || layout_.tp_index(ctx.world.rank()) == 0;
    for (const auto& [name, v] : layer_counters(ctx.rt, f, counts)) st.counters[name] = v;
  }

  void dump(BenchContext& ctx, const std::string& d, LayerCase& f) {
    dump_layer_case(dump_dir_ + "/" + d, ctx.world.rank(), ctx.device, f,
                    DumpMeta{d, ctx.opts.dtype, backend_name(ctx.backend()), ctx.world.size(), dispatcher_row(d).shares_tokens() ? tp_ : 1,
                             moe_.resolved_tokens});
  }

  MoEOptions moe_;
  std::vector<std::string> dispatchers_;
  std::optional<int> tp_opt_;
  int tp_ = 1;
  ParallelLayout layout_;
  std::string dump_dir_, roofline_path_, reference_path_, popularity_text_ = "natural";
  std::optional<TorchRun> torch_;
  bool kernels_ = false;
  std::map<std::string, KernelLogRuns> kernel_logs_;  // per dispatcher (--kernels)
  std::set<std::string> measured_;                    // dispatchers whose layer was made and run
  Popularity popularity_;
  RooflineProfile roofline_;
  int warmup_ = 1, iters_ = 3;
  std::unique_ptr<Communicator> tp_comm_;
  std::unique_ptr<LayerCase> fixture_;
  std::unique_ptr<TrackingAllocator> scratch_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::MoELayerBench>(argc, argv); }
