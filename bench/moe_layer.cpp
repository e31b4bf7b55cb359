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
#include "runtime/host_copy.h"
#include "bench/moe_options.h"
#include "harness/bench.h"
#include "harness/kernel_table.h"
#include "moe/init.h"
#include "moe/moe_layer.h"
#include "harness/layer_dump.h"
#include "moe/routing_workload.h"
#include "runtime/layout.h"
#include "models/csv_rows.h"
#include "models/paper_specs.h"
#include "models/roofline.h"

namespace moebench {
namespace {

const std::vector<std::string> kRanges = {"moe.gating",      "moe.dispatch",    "moe.expert",
                                          "moe.combine",     "moe.combine.bwd", "moe.expert.bwd",
                                          "moe.dispatch.bwd", "moe.gating.bwd", "moe.sync.bwd",
                                          "moe.gate_sync.bwd"};
constexpr double kOverheadTarget = 1.15;

// One dispatcher's layer with its tensors, made at its first repetition and kept for the rest;
// its own allocator, so its peaks are its own.
struct Fixture {
  std::string dispatcher;
  TrackingAllocator alloc;
  std::unique_ptr<MoELayer> layer;
  Buffer x, dy, y, dx;
  std::optional<MoEContext> last;  // the last real forward + backward's micro-batch
  bool dumped = false;
  Fixture(Backend b, const Stream& s) : alloc(b, s) {}
};

class MoELayerBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_moe_layer"; }
  std::string description() const override {
    return "One MoE layer, forward + backward, per dispatcher (local, expert_parallel, ppmoe), with its time breakdown.";
  }
  bool takes_iteration_counts() const override { return true; }
  void add_options(CLI::App& app) override {
    moe_.add(app);
    add_choices(app, "--dispatchers", dispatchers_, {"local", "expert_parallel", "ppmoe"}, "Dispatchers to run (default: all; with --expert-gemm segmented, local and ppmoe)");
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
    const bool segmented = moe_.expert_gemm == "segmented";  // counts on the device: no all-to-all sized on the host
    const bool listed = !dispatchers_.empty();
    if (!listed) dispatchers_ = segmented ? std::vector<std::string>{"local", "ppmoe"}
                                          : std::vector<std::string>{"local", "expert_parallel", "ppmoe"};
    if (segmented && listed &&
        std::find(dispatchers_.begin(), dispatchers_.end(), "expert_parallel") != dispatchers_.end())
      return "--dispatchers: expert_parallel sizes its all-to-all from row counts on the host, and --expert-gemm "
             "segmented keeps them on the device; allowed with it: local, ppmoe";
    const bool has_ppmoe = std::find(dispatchers_.begin(), dispatchers_.end(), "ppmoe") != dispatchers_.end();
    if (tp_opt_ && !has_ppmoe) return "--tp: only the ppmoe dispatcher uses it; add ppmoe to --dispatchers or drop --tp";
    tp_ = tp_opt_.value_or(world);
    if (world % tp_ != 0)
      return "--tp: '" + std::to_string(tp_) + "' does not divide the " + std::to_string(world) +
             " ranks; allowed: a divisor of the number of ranks";
    // PPMoE's tensor-parallel groups, and the data-parallel replicas they form, from the one layout.
    if (auto e = ParallelLayout::make(world, tp_, 1, 1, &layout_)) return e;
    for (const auto& d2 : dispatchers_) {
      const int r = d2 == "expert_parallel" ? world : d2 == "ppmoe" ? tp_ : 1;
      if (auto e = moe_.resolve(d, tokens, ctx.dtype(), ctx.backend(), r)) {
        if (d2 == "ppmoe" && e->rfind("--experts", 0) == 0) return *e + " (the --tp group)";
        return e;
      }
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
    const MoEConfig& c = moe_.config;
    for (const RunRecord& r : runs) {
      const std::string d = r.name.substr(r.name.find('/') + 1);
      if (r.error) {
        std::printf("moe_layer/%s: skipped: %s\n", d.c_str(), r.error_message.c_str());
        continue;
      }
      write_kernels(ctx, d, r.time_ms().median);
      std::vector<std::string> cols = {"dispatcher", "tokens_per_rank", "hidden", "ffn", "experts", "prototypes",
                                       "top_k", "capacity_factor", "expert_gemm", "gate", "gate_kernels", "total_ms",
                                       "total_ms_min", "total_ms_max"};
      for (const auto& n : kRanges) cols.push_back(n + "_ms");
      for (const char* extra :
           {"expert_gemms_ms", "expert_gemms_ms_min", "expert_gemms_ms_max", "expert_gemms_over_floor", "overhead_ratio",
            "overhead_ratio_min",
            "overhead_ratio_max", "overhead_status", "target_ratio", "tokens_per_s", "peak_model_states_bytes",
            "peak_activations_bytes", "peak_buffers_bytes", "peak_temporary_bytes", "tokens_dropped_fraction", "load_cv",
            "popularity", "busiest_over_mean_load", "computed_rows_over_routed", "repetitions", "iterations"})
        cols.push_back(extra);
      for (const char* col : {"torch_variant", "torch_ms", "torch_ms_min", "torch_ms_max", "torch_busiest_over_mean_load",
                              "speed_vs_torch", "torch", "torch_device"})
        cols.push_back(col);
      for (const auto& col : roofline_columns()) cols.push_back(col);
      CsvTable t(cols);
      const Spread total = r.time_ms(), gem = r.counter("expert_gemms_ms"), ratio = r.counter("overhead_ratio");
      const std::optional<std::string> unresolved = unresolved_reason(total, gem, ratio);
      std::vector<std::string> row = {d, std::to_string(moe_.resolved_tokens),
                                      std::to_string(c.hidden), std::to_string(c.ffn), std::to_string(c.experts),
                                      std::to_string(c.prototypes), std::to_string(c.top_k),
                                      c.capacity_factor ? fmt(*c.capacity_factor) : "dropless", moe_.expert_gemm,
                                      gate_impl_name(c.gate), moe_.gate_kernels_ran, fmt(total.median), fmt(total.min),
                                      fmt(total.max)};
      for (const auto& n : kRanges) row.push_back(fmt(r.counter(n).median));
      for (double v : {gem.median, gem.min, gem.max}) row.push_back(fmt(v));
      // The expert GEMMs alone against their own floor (models/roofline.h's moe_expert_work).
      const Work experts_work{r.counter("roofline_expert_flops").median, r.counter("roofline_expert_bytes").median};
      row.push_back(roofline_.hw ? fmt(roofline(experts_work, *roofline_.hw, dtype_size(c.dtype) == 2, roofline_.rate_scale,
                                                gem.median).time_over_floor, 4)
                                 : "n/a (no profile of this device: --roofline-profile)");
      for (double v : {ratio.median, ratio.min, ratio.max}) row.push_back(unresolved ? "n/a" : fmt(v, 4));
      row.push_back(unresolved ? "unresolved: " + *unresolved : "ok");
      row.push_back(fmt(kOverheadTarget));
      row.push_back(fmt(moe_.resolved_tokens / (total.median / 1e3)));
      for (const char* k : {"peak_model_states", "peak_activations", "peak_buffers", "peak_temporary"})
        row.push_back(fmt(r.counter(k).max, 15));
      row.push_back(fmt(r.counter("dropped_fraction").median, 8));
      row.push_back(fmt(r.counter("load_cv").median, 8));
      row.push_back(popularity_.text);
      row.push_back(fmt(r.counter("busiest_over_mean").median, 6));
      row.push_back(fmt(r.counter("computed_over_routed_rows").median, 6));
      row.push_back(std::to_string(r.repetitions()));
      row.push_back(std::to_string(r.iterations));
      for (auto& cell : torch_cells(d, total.median)) row.push_back(cell);
      const Work work{r.counter("roofline_flops").median, r.counter("roofline_bytes").median};
      for (auto& cell : roofline_cells(roofline_, work, dtype_size(c.dtype) == 2, total.median)) row.push_back(cell);
      t.add_row(row);
      t.write(ctx.opts.out_dir + "/moe/layer_" + d + ".csv", ctx.provenance);
      if (unresolved)
        std::printf("moe_layer/%-16s total %9.3f ms  expert GEMMs %9.3f ms  overhead ratio: unresolved (%s)\n", d.c_str(),
                    total.median, gem.median, unresolved->c_str());
      else
        std::printf("moe_layer/%-16s total %9.2f ms  expert GEMMs %9.2f ms  overhead ratio %.3f [%.3f .. %.3f] over %d "
                    "repetitions (target <= %.2f: %s)\n",
                    d.c_str(), total.median, gem.median, ratio.median, ratio.min, ratio.max, ratio.samples,
                    kOverheadTarget, ratio.median <= kOverheadTarget ? "met" : "NOT met");
      if (torch_ && d == "local")
        std::printf("moe_layer/local            PyTorch %s (%s): %.3f ms -> ours %.2fx its speed\n", torch_->variant.c_str(),
                    torch_->torch.c_str(), torch_->ms, torch_->ms / total.median);
    }
    return 0;
  }

 private:
  // A layer cannot be faster than its own GEMMs: a median ratio below 1 means the overhead is
  // below what this machine's timer noise resolves at this size, and is no result. (Single
  // repetitions below 1 stay visible in the spread.)
  static std::optional<std::string> unresolved_reason(const Spread& total, const Spread& gem, const Spread& ratio) {
    if (ratio.median >= 1.0) return std::nullopt;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "layer %.3g ms measured below its own GEMMs %.3g ms: the overhead is below the timer noise at this size",
                  total.median, gem.median);
    return std::string(buf);
  }

  std::unique_ptr<TokenDispatcher> make(BenchContext& ctx, const std::string& d, const DispatcherEnv& env) {
    if (d == "expert_parallel") return make_expert_parallel_dispatcher(env, ctx.world);
    if (d == "ppmoe") {
      const int r = ctx.world.rank();
      if (!tp_comm_) tp_comm_ = ctx.world.split(layout_.tp_color(r), layout_.tp_index(r));
      return make_ppmoe_dispatcher(env, *tp_comm_);
    }
    return make_local_dispatcher(env);
  }

  // The fastest PyTorch variant that ran, at our sizes and popularity; none without --reference.
  std::optional<std::string> read_reference(const BenchContext& ctx) {
    if (reference_path_.empty()) return std::nullopt;
    const MoEConfig& c = moe_.config;
    if (c.capacity_factor || c.prototypes != 1)
      return "--reference: PyTorch's layer (torch_layer.py) is dropless plain top-k; drop --reference, or "
             "--capacity-factor and --prototypes";
    try {
      const CsvRows t = CsvRows::read(reference_path_);
      const std::string ours = std::to_string(moe_.resolved_tokens) + " tokens, h " + std::to_string(c.hidden) + ", f " +
                               std::to_string(c.ffn) + ", " + std::to_string(c.experts) + " experts, top-" +
                               std::to_string(c.top_k) + ", " + popularity_.text;
      for (std::size_t r = 0; r < t.size(); ++r) {
        auto cell = [&](const char* col) { return t.cell(r, col); };
        const std::string theirs = cell("tokens") + " tokens, h " + cell("hidden") + ", f " + cell("ffn") + ", " +
                                   cell("experts") + " experts, top-" + cell("top_k") + ", " + cell("popularity");
        if (theirs != ours)
          return "--reference: " + reference_path_ + " is another layer (" + theirs + "; ours: " + ours +
                 "); run torch_layer.py with the same sizes and --popularity";
        if (cell("math").rfind(std::string(dtype_name(ctx.dtype())), 0) != 0)
          return "--reference: " + reference_path_ + " was measured in " + cell("math") + ", not " + std::string(dtype_name(ctx.dtype()));
        if (cell("status") != "ok") continue;
        const double ms = std::stod(cell("ms"));
        if (!torch_ || ms < torch_->ms)
          torch_ = TorchLayer{cell("variant"), ms, std::stod(cell("ms_min")), std::stod(cell("ms_max")),
                              cell("busiest_over_mean_load"), cell("torch"), cell("torch_device")};
      }
    } catch (const std::exception& e) {
      return "--reference: " + std::string(e.what());
    }
    return std::nullopt;
  }

  // speed_vs_torch: PyTorch's fastest variant's time over ours, for the one-device (local) row.
  std::vector<std::string> torch_cells(const std::string& d, double ours_ms) const {
    if (!torch_) {
      const std::string why = reference_path_.empty() ? "n/a (no --reference)" : "n/a (no PyTorch variant ran)";
      return {"n/a", "n/a", "n/a", "n/a", "n/a", why, "n/a", "n/a"};
    }
    if (d != "local")
      return {torch_->variant, "n/a", "n/a", "n/a", "n/a", "n/a (PyTorch's layer runs on one device: see the local row)",
              torch_->torch, torch_->device};
    return {torch_->variant, fmt(torch_->ms), fmt(torch_->ms_min), fmt(torch_->ms_max), torch_->busiest,
            fmt(torch_->ms / ours_ms, 4), torch_->torch, torch_->device};
  }

  // PPMoE ranks of one TP group hold the same tokens; otherwise every rank has its own.
  int token_block(const BenchContext& ctx, const std::string& d) const {
    return d == "ppmoe" ? layout_.dp_index(ctx.world.rank()) : ctx.world.rank();
  }

  Fixture& fixture(BenchContext& ctx, const std::string& d) {
    if (fixture_ && fixture_->dispatcher == d) return *fixture_;
    fixture_.reset();  // one layer alive at a time
    const MoEConfig& c = moe_.config;
    const int T = moe_.resolved_tokens, h = c.hidden;
    const std::uint64_t seed = moe_.resolved_seed;
    auto f = std::make_unique<Fixture>(ctx.backend(), ctx.device.default_stream());
    f->dispatcher = d;
    const Stream& s = ctx.device.default_stream();
    f->layer = std::make_unique<MoELayer>(c, ctx.device, f->alloc, make(ctx, d, DispatcherEnv{c, ctx.device, f->alloc}));
    f->layer->init(seed, s);
    const std::size_t first = std::size_t(token_block(ctx, d)) * T * h;
    std::vector<float> x = normal_vector(std::size_t(T) * h, seed, 77, 1.f, first);
    if (popularity_.kind != Popularity::Kind::natural) {  // the gate's weights are the same on every rank
      const std::vector<float> gate = host_f32(ctx.device, f->alloc, f->layer->gate().weight().data(),
                                               std::size_t(h) * c.experts, DType::f32);
      steer_tokens(x, T, h, 1.0, gate, c.experts, popularity_, seed, first / h);
    }
    f->x = device_from_f32(ctx.device, f->alloc, x, c.dtype, MemTag::activations);
    f->dy = device_from_f32(ctx.device, f->alloc, normal_vector(std::size_t(T) * h, seed, 78, 1e-3f, first), c.dtype,
                            MemTag::activations);
    f->y = f->alloc.allocate(std::size_t(T) * h * dtype_size(c.dtype), MemTag::activations);
    f->dx = f->alloc.allocate(std::size_t(T) * h * dtype_size(c.dtype), MemTag::activations);
    for (int i = 0; i < warmup_; ++i) {
      MoEContext mb = f->layer->forward(f->x.data(), T, f->y.data(), s);
      f->layer->backward(mb, f->dy.data(), f->dx.data(), s);
    }
    ctx.device.synchronize();
    fixture_ = std::move(f);
    return *fixture_;
  }

  void log_kernels(BenchContext& ctx, const std::string& d) {
    Fixture& f = fixture(ctx, d);
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
    std::vector<std::string> cols = {"dispatcher"};
    for (const auto& col : kernel_columns("iteration")) cols.push_back(col);
    for (const char* col : {"expert_gemm", "gate_kernels", "tokens_per_rank", "hidden", "ffn", "experts", "top_k", "popularity"})
      cols.push_back(col);
    CsvTable t(cols);
    for (auto& row : kernel_cells(log->second)) {
      row.insert(row.begin(), d);
      for (const auto& cell : {moe_.expert_gemm, moe_.gate_kernels_ran, std::to_string(moe_.resolved_tokens), std::to_string(c.hidden),
                               std::to_string(c.ffn), std::to_string(c.experts), std::to_string(c.top_k), popularity_.text})
        row.push_back(cell);
      t.add_row(row);
    }
    t.write(ctx.opts.out_dir + "/moe/kernels_" + d + ".csv", ctx.provenance);
    std::printf("moe_layer/%-16s %s\n", d.c_str(), slowest_kernels(log->second).c_str());
    std::printf("moe_layer/%-16s %s\n", d.c_str(), logged_against_measured(log->second, measured_ms).c_str());
  }

  void run(benchmark::State& st, BenchContext& ctx, const std::string& d) {
    Fixture& f = fixture(ctx, d);
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
      for (const auto& n : kRanges) range_ms[n] += ctx.rt.max(totals.count(n) ? totals.at(n) : 0.0);
      // The same expert GEMMs alone, right after, on the rows this step routed (not in the manual time).
      gemm_ms += ctx.time_ms(s, [&] { layer.experts().gemms_only(f.last->experts, *scratch_, s); });
    }
    ctx.profile_end();
    layer.read_counts(*f.last, s);  // the counts of the last step, after its timing
    if (!dump_dir_.empty() && !f.dumped) {
      dump(ctx, d, layer, f);
      f.dumped = true;
    }
    const double n = double(st.iterations());
    for (const auto& name : kRanges) st.counters[name] = range_ms[name] / n;
    st.counters["expert_gemms_ms"] = gemm_ms / n;
    st.counters["overhead_ratio"] = total_ms / gemm_ms;
    // The busiest rank's work: the layer ends when it does.
    const MoEConfig& c = moe_.config;
    const Work work = moe_layer_work(T, c.hidden, c.ffn, c.experts, layer.experts().count(),
                                     double(f.last->experts.total_rows()), int(dtype_size(c.dtype)));
    st.counters["roofline_flops"] = ctx.rt.max(work.flops);
    st.counters["roofline_bytes"] = ctx.rt.max(work.bytes);
    const Work experts_work = moe_expert_work(c.hidden, c.ffn, layer.experts().count(),
                                              double(f.last->experts.total_rows()), int(dtype_size(c.dtype)));
    st.counters["roofline_expert_flops"] = ctx.rt.max(experts_work.flops);
    st.counters["roofline_expert_bytes"] = ctx.rt.max(experts_work.bytes);
    const LoadStats load = global_load(ctx, d, *f.last);
    st.counters["dropped_fraction"] = load.dropped_fraction;
    st.counters["load_cv"] = load.cv;
    st.counters["busiest_over_mean"] = busiest_over_mean(load.routed);
    // What padding costs (--expert-gemm padded): rows the expert GEMMs compute over rows routed, on
    // the rank where it is largest; 1 for the routes that compute the rows alone.
    const ExpertsContext& ec = f.last->experts;
    st.counters["computed_over_routed_rows"] =
        ctx.rt.max(ec.total_rows() ? double(ec.computed_rows()) / double(ec.total_rows()) : 1.0);
    for (MemTag tag : {MemTag::model_states, MemTag::activations, MemTag::buffers, MemTag::temporary})
      st.counters[std::string("peak_") + mem_tag_name(tag)] = ctx.rt.max(double(f.alloc.peak(tag)));
  }

  // Routed and kept tokens per expert summed over every rank's tokens (PPMoE ranks of one TP
  // group hold the same tokens: one of them counts).
  LoadStats global_load(BenchContext& ctx, const std::string& d, const MoEContext& mb) {
    const int E = moe_.config.experts;
    const bool counts = d != "ppmoe" || layout_.tp_index(ctx.world.rank()) == 0;
    const Routing& r = mb.routing;
    std::vector<double> both(2 * std::size_t(E), 0.0);  // [routed][kept]
    if (counts)
      for (std::size_t i = 0; i < r.routed.size(); ++i) {
        both[i % E] += r.routed[i];
        both[E + i % E] += r.kept[i];
      }
    ctx.rt.sum(both);
    std::vector<std::int32_t> routed(E), kept(E);
    for (int e = 0; e < E; ++e) {
      routed[e] = std::int32_t(both[e]);
      kept[e] = std::int32_t(both[E + e]);
    }
    return load_stats(routed, kept, E);
  }

  void dump(BenchContext& ctx, const std::string& d, MoELayer& layer, Fixture& f) {
    const std::string folder = dump_dir_ + "/" + d;
    const std::string base = folder + "/rank" + std::to_string(ctx.world.rank()) + "_";
    dump_layer_state(base, ctx.device, f.alloc, layer, *f.last, LayerIO{f.x.data(), f.y.data(), f.dy.data(), f.dx.data()});
    if (ctx.world.rank() == 0) write_file_atomic(folder + "/meta.json", meta_json(ctx, d, layer));
  }

  // How the dumped ranks form layers, so a checker can rebuild the whole computation.
  std::string meta_json(const BenchContext& ctx, const std::string& d, MoELayer& layer) const {
    const MoEConfig& c = moe_.config;
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "{\"dispatcher\": \"%s\", \"ranks\": %d, \"tp\": %d, \"tokens_per_rank\": %d, \"hidden\": %d, "
                  "\"ffn\": %d, \"experts\": %d, \"prototypes\": %d, \"top_k\": %d, \"capacity_factor\": %s, "
                  "\"capacity_groups_per_rank\": %d, \"aux_loss\": %s, \"aux_coef\": %.9g, \"aux_grad_scale\": %.9g, "
                  "\"dtype\": \"%s\", \"backend\": \"%s\"}\n",
                  d.c_str(), ctx.world.size(), d == "ppmoe" ? tp_ : 1, moe_.resolved_tokens, c.hidden, c.ffn, c.experts,
                  c.prototypes, c.top_k, c.capacity_factor ? fmt(*c.capacity_factor, 17).c_str() : "null",
                  layer.dispatcher().capacity_groups(moe_.resolved_tokens), c.aux_loss ? "true" : "false",
                  double(c.aux_coef), double(layer.dispatcher().aux_grad_scale()), ctx.opts.dtype.c_str(),
                  backend_name(ctx.backend()));
    return buf;
  }

  MoEOptions moe_;
  std::vector<std::string> dispatchers_;
  std::optional<int> tp_opt_;
  int tp_ = 1;
  ParallelLayout layout_;
  struct TorchLayer {
    std::string variant;
    double ms = 0, ms_min = 0, ms_max = 0;
    std::string busiest, torch, device;
  };
  std::string dump_dir_, roofline_path_, reference_path_, popularity_text_ = "natural";
  std::optional<TorchLayer> torch_;
  bool kernels_ = false;
  std::map<std::string, KernelLogRuns> kernel_logs_;  // per dispatcher (--kernels)
  std::set<std::string> measured_;                    // dispatchers whose layer was made and run
  Popularity popularity_;
  RooflineProfile roofline_;
  int warmup_ = 1, iters_ = 3;
  std::unique_ptr<Communicator> tp_comm_;
  std::unique_ptr<Fixture> fixture_;
  std::unique_ptr<TrackingAllocator> scratch_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::MoELayerBench>(argc, argv); }
