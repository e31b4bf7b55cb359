// moebench_gpt_step (gpt.step): one training step -- forward, backward, AdamW -- of the GPT model
// on one device (TP = PP = DP = 1), dense and with an MoE layer on every other FFN (at the paper
// scale GPT-3 Medium's width with 8 top-1 experts: PPMoE's 64 would need about 103 GB of
// weights, gradients and AdamW states on one device), in tokens per second, beside the
// same model written in plain PyTorch (experiments/gpt/torch_step.py: eager, SDPA and compiled
// variants, the fastest taken) on the same device when its CSV is given (--reference): the ratio
// says whether our step is faster. Each row carries its roofline (models/roofline.h) from
// --roofline-profile. The dense step may be captured once into a graph and replayed
// (--step-graph; runtime/stream_graph.h). Writes <out>/gpt/step.csv, and <out>/gpt/
// step_breakdown.csv: where a step's time goes, its ranges timed over as many eager steps as
// repetitions (GptTrainer::set_breakdown), each phase with its FLOPs and achieved rate.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>
#include "kernels/batched_gemm.h"
#include "kernels/sdpa.h"
#include "gpt/gpt_trainer.h"
#include "harness/bench.h"
#include "harness/kernel_table.h"
#include "harness/range_tree.h"
#include "models/csv_rows.h"
#include "models/paper_specs.h"
#include "models/roofline.h"

namespace moebench {
namespace {

// PyTorch's fastest variant of a model (torch_step.py: eager, sdpa, compiled).
struct Reference {
  double ms = 0, ms_min = 0, ms_max = 0;
  std::optional<double> peak_mib;  // where that PyTorch reports its allocator's peak (CUDA)
  std::string torch, device, math, variant, attention;
};

class GptStepBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_gpt_step"; }
  std::string description() const override {
    return "One GPT training step on one device, dense and MoE, beside the same model in plain PyTorch.";
  }
  void add_options(CLI::App& app) override {
    add_whole(app, "--sequences", sequences_opt_, 1, 1 << 16, "Sequences per step (default: by scale)");
    add_path(app, "--reference", reference_, "The PyTorch step's CSV (experiments/gpt/torch_step.py) to compare with");
    add_path(app, "--roofline-profile", roofline_path_,
             "This device's profile (moebench_profile's CSV) for the roofline columns; none: they are n/a");
    add_choice(app, "--attention", attention_opt_, {"materialized", "blocked", "cudnn"},
               "Causal attention keeping the whole [seq, seq] probabilities; computed a panel of query rows at a "
               "time keeping only each row's softmax statistic; or cuDNN's fused attention (fp16/bf16; on the cpu its "
               "operation graph evaluated op by op) (default: blocked on cuda, materialized on cpu)");
    add_whole(app, "--attention-panel-rows", panel_rows_opt_, 1, 1 << 20,
              "Blocked attention: query rows per panel (default 512)");
    add_choice(app, "--step-graph", step_graph_opt_, {"eager", "captured"},
               "The step enqueued op by op, or captured once into a graph and replayed (a CUDA graph; on the CPU its "
               "ops replayed onto the same streams) (default: captured on cuda, eager on cpu). The MoE model's step is "
               "captured only with --expert-gemm segmented: the other routes read expert counts on the host");
    add_choice(app, "--expert-gemm", expert_gemm_opt_, {"grouped", "serial", "padded", "streams", "segmented"},
               "The MoE model's experts (moebench_moe_layer's routes; segmented keeps the counts on the device) "
               "(default: padded on cuda where the FFN width is a multiple of 8, else grouped)");
    add_flag(app, "--kernels", kernels_,
             "Also run as many eager steps as repetitions op by op (on cuda every kernel, copy and memset, through "
             "CUPTI) into gpt/step_kernels.csv, each under the phase that launched it");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    if (ctx.world.size() != 1)
      return "gpt.step measures one device, so it runs on one rank; got " + std::to_string(ctx.world.size()) +
             " (launch it with 1 rank: --ranks 1)";
    switch (ctx.scale()) {
      case Scale::tiny:
        shape_ = {.layers = 2, .hidden = 32, .ffn = 128, .heads = 4, .seq = 16, .vocab = 64, .experts = 4, .moe_every = 2};
        sequences_ = 2;
        break;
      case Scale::local:
        shape_ = {.layers = 4, .hidden = 256, .ffn = 1024, .heads = 4, .seq = 128, .vocab = 512, .experts = 8, .moe_every = 2};
        sequences_ = 4;
        break;
      case Scale::paper:
        shape_ = model_spec("gpt3-medium").shape;
        shape_.experts = 8;  // one device: 12 MoE layers of 8 experts (issue's target), not PPMoE's 64
        sequences_ = 2;
        break;
    }
    sequences_ = sequences_opt_.value_or(sequences_);
    attention_ = attention_opt_.empty()
                     ? (ctx.backend() == Backend::cuda ? AttentionKernel::blocked : AttentionKernel::materialized)
                     : *parse_attention_kernel(attention_opt_);
    if (panel_rows_opt_ && attention_ != AttentionKernel::blocked)
      return "--attention-panel-rows: sets the blocked attention's panels; this run's attention is " +
             std::string(attention_kernel_name(attention_)) + " (add --attention blocked)";
    if (attention_ == AttentionKernel::cudnn) {
      Exec ex;
      ex.backend = ctx.backend();
      SdpaShape s;
      s.head_dim = shape_.hidden / shape_.heads;
      s.t = ctx.dtype();
      if (const std::string why = sdpa_unsupported(ex, s); !why.empty()) return "--attention cudnn: " + why;
    }
    panel_rows_ = panel_rows_opt_.value_or(GptConfig{}.attention_panel_rows);
    captured_ = step_graph_opt_.empty() ? ctx.backend() == Backend::cuda : step_graph_opt_ == "captured";
    try {
      roofline_ = load_roofline_profile("--roofline-profile", roofline_path_, ctx.provenance.backend, ctx.provenance.device,
                                        std::string(dtype_name(ctx.dtype())), 1,
                                        int(std::thread::hardware_concurrency()));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    for (bool moe : {false, true})
      if (auto e = validate_layout(layout(moe), shape_, 1)) return e;
    MoEConfig experts = layout_model(shape_, layout(true), ctx.dtype()).moe;
    expert_gemm_ = expert_gemm_opt_.empty() ? default_expert_gemm(ctx.backend(), experts.ffn)
                                            : *parse_expert_gemm(expert_gemm_opt_);
    experts.expert_gemm = expert_gemm_;
    if (auto e = experts.validate_for(ctx.backend())) return e;
    if (!reference_.empty()) {
      if (!std::filesystem::is_regular_file(reference_)) return "--reference: " + reference_ + " is not a file";
      try {
        const CsvRows t = CsvRows::read(reference_);
        for (std::size_t r = 0; r < t.size(); ++r) {
          auto cell = [&](const char* col) { return t.cell(r, col); };
          auto whole = [&](const char* col) { return std::stoi(cell(col)); };
          const ModelShape& b = shape_;
          if (whole("sequences") != sequences_ || whole("layers") != b.layers || whole("hidden") != b.hidden ||
              whole("heads") != b.heads || whole("ffn") != b.ffn || whole("seq") != b.seq || whole("vocab") != b.vocab ||
              whole("experts") != (cell("model") == "moe" ? b.experts : 0))
            return "--reference: " + reference_ + " is another model or batch (" + cell("layers") + " layers, hidden " +
                   cell("hidden") + ", " + cell("experts") + " experts, " + cell("sequences") + " sequences of " +
                   cell("seq") + "); run both at the same --scale and --sequences";
          if (cell("math").rfind(std::string(dtype_name(ctx.dtype())), 0) != 0)
            return "--reference: " + reference_ + " was measured in " + cell("math") + ", not " +
                   std::string(dtype_name(ctx.dtype())) + "; run torch_step.py with --dtype " +
                   std::string(dtype_name(ctx.dtype()));
          if (cell("status") != "ok") continue;  // a variant this PyTorch lacks
          const double ms = std::stod(cell("ms_per_step"));
          auto& best = reference_rows_[cell("model")];
          if (best.ms == 0 || ms < best.ms) {
            best = Reference{ms, std::stod(cell("ms_per_step_min")), std::stod(cell("ms_per_step_max")), std::nullopt,
                             cell("torch"), cell("torch_device"), cell("math"), cell("variant"), cell("attention")};
            if (t.has("peak_mib") && cell("peak_mib").rfind("n/a", 0) != 0) best.peak_mib = std::stod(cell("peak_mib"));
          }
        }
      } catch (const std::exception& e) {
        return "--reference: " + std::string(e.what());
      }
    }
    return std::nullopt;
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/gpt", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (bool moe : {false, true})
      ctx.add(key(moe), 1, [this, &ctx, moe](benchmark::State& st) { run(st, ctx, moe); });
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    if (kernels_)
      for (const bool moe : {false, true})
        if (phases_.count(moe)) log_kernels(ctx, moe);
    trainer_.reset();
    std::map<std::string, Spread> ms;
    for (const auto& r : runs)
      if (!r.error) ms[r.name] = r.time_ms();
    std::vector<std::string> cols = {"model", "layers", "hidden", "heads", "ffn", "seq", "vocab", "experts", "sequences",
                                     "tokens_per_step", "ms_per_step", "ms_per_step_min", "ms_per_step_max", "tokens_per_s",
                                     "torch_ms_per_step", "torch_ms_per_step_min", "torch_ms_per_step_max",
                                     "torch_tokens_per_s", "speed_vs_torch", "torch_variant", "torch_attention", "torch",
                                     "torch_device", "torch_math", "attention", "attention_panel_rows", "step_graph",
                                     "graph_nodes", "expert_gemm", "computed_rows_over_routed", "peak_mib",
                                     "torch_peak_mib", "memory_vs_torch", "repetitions", "new_gemm_plans_in_measured_steps",
                                     "gemm_timings_in_measured_steps", "new_pool_blocks_in_measured_steps"};
    for (const auto& c : roofline_columns()) cols.push_back(c);
    CsvTable t(cols);
    for (bool moe : {false, true}) {
      if (!ms.count(key(moe))) continue;
      const Spread s = ms[key(moe)];
      const GptConfig m = layout_model(shape_, layout(moe), ctx.dtype());
      const double tokens = double(sequences_) * m.seq;
      const std::string name = moe ? "moe" : "dense";
      const auto ref = reference_rows_.find(name);
      const bool has_ref = ref != reference_rows_.end();
      auto r = [&](double v) { return has_ref ? fmt(v) : std::string("n/a"); };
      std::vector<std::string> row = {name, std::to_string(m.layers), std::to_string(m.hidden), std::to_string(m.heads), std::to_string(m.ffn),
                 std::to_string(m.seq), std::to_string(m.vocab), std::to_string(moe ? shape_.experts : 0),
                 std::to_string(sequences_), fmt(tokens), fmt(s.median), fmt(s.min), fmt(s.max),
                 fmt(tokens / (s.median / 1e3)), r(has_ref ? ref->second.ms : 0), r(has_ref ? ref->second.ms_min : 0),
                 r(has_ref ? ref->second.ms_max : 0), r(has_ref ? tokens / (ref->second.ms / 1e3) : 0),
                 has_ref ? fmt(ref->second.ms / s.median, 4) : "n/a (no --reference)",
                 has_ref ? ref->second.variant : "n/a", has_ref ? ref->second.attention : "n/a",
                 has_ref ? ref->second.torch : "n/a", has_ref ? ref->second.device : "n/a",
                 has_ref ? ref->second.math : "n/a", attention_kernel_name(attention_),
                 attention_ == AttentionKernel::blocked ? std::to_string(panel_rows_) : "n/a"};
      const bool graph = step_captured(moe);
      row.push_back(graph       ? "captured"
                    : captured_ ? "eager (the MoE gates read their expert counts on the host; --expert-gemm segmented "
                                  "keeps them on the device)"
                                : "eager");
      row.push_back(graph ? std::to_string(graph_nodes_[moe]) : "n/a");
      row.push_back(moe ? expert_gemm_name(expert_gemm_) : "n/a");
      // What padding costs the experts (--expert-gemm padded): rows computed over rows routed.
      const double computed = computed_over_routed_[moe];
      row.push_back(!moe ? "n/a (dense)" : computed > 0 ? fmt(computed, 4)
                    : "n/a (no rows counted on the host: --expert-gemm segmented keeps the counts on the device)");
      // Memory beside PyTorch's: ours over its peak (the target is at most 1.1).
      const double peak = peak_mib_[moe];
      row.push_back(fmt(peak));
      if (has_ref && ref->second.peak_mib) {
        row.push_back(fmt(*ref->second.peak_mib));
        row.push_back(fmt(peak / *ref->second.peak_mib, 4));
      } else {
        const std::string why = has_ref ? "n/a (the reference reports no peak: PyTorch keeps one on CUDA only)"
                                        : "n/a (no --reference)";
        row.push_back(why);
        row.push_back(why);
      }
      row.push_back(std::to_string(s.samples));
      // A cuBLASLt plan made, or its algorithms timed, inside a measured step is host time in it
      // (kernels/batched_gemm_cuda.cu): a routing whose GEMM shapes are new every step pays it each step.
      for (std::size_t n : {plans_in_measured_[moe].plans, plans_in_measured_[moe].timed})
        row.push_back(ctx.backend() == Backend::cuda ? std::to_string(n) : "n/a (cpu: its GEMMs make no cuBLASLt plans)");
      // A block the pool took from the system inside a measured step (cudaMalloc on a GPU) is
      // host time in it; routing that grows a buffer past its size class pays it.
      row.push_back(std::to_string(pool_blocks_in_measured_[moe]));
      const Work work = gpt_step_work(moe ? shape_ : shape_.dense(), sequences_, int(dtype_size(ctx.dtype())));
      for (auto& cell : roofline_cells(roofline_, work, dtype_size(ctx.dtype()) == 2, s.median)) row.push_back(cell);
      t.add_row(row);
      std::printf("gpt.step %-5s %9.2f ms/step  %10.1f tokens/s", name.c_str(), s.median, tokens / (s.median / 1e3));
      if (has_ref)
        std::printf("   PyTorch %s (%s) on %s: %.2f ms/step -> ours %.2fx its speed", ref->second.torch.c_str(),
                    ref->second.variant.c_str(), ref->second.device.c_str(), ref->second.ms, ref->second.ms / s.median);
      if (ctx.backend() == Backend::cuda)
        std::printf("   %zu new cuBLASLt plans, %zu timed, %lld new pool blocks, in the measured steps (after %d warm-up steps)",
                    plans_in_measured_[moe].plans, plans_in_measured_[moe].timed,
                    static_cast<long long>(pool_blocks_in_measured_[moe]), warmup_steps_[moe]);
      std::printf("\n");
    }
    t.write(ctx.opts.out_dir + "/gpt/step.csv", ctx.provenance);
    write_breakdown(ctx);
    write_kernels(ctx, ms);
    return 0;
  }

 private:
  static ParallelLayout layout(bool moe) { return ParallelLayout::of(moe ? LayoutKind::ppmoe : LayoutKind::dense, 1, 1, 1); }
  static std::string key(bool moe) { return std::string("gpt_step/") + (moe ? "moe" : "dense"); }
  // Whether the model's measured steps are replayed from a graph: the MoE model's only with
  // segmented experts, the other routes reading their counts on the host.
  bool step_captured(bool moe) const { return captured_ && (!moe || expert_gemm_ == ExpertGemm::segmented); }

  // gpt/step_breakdown.csv: per model, each range of the eager steps (a tree: phase is its path),
  // with its work as models/roofline.h counts it (a phase's FLOPs and least bytes; a parent's the
  // sums of its children's) and, with a profile of this device, its floor: a phase's
  // max(FLOPs / GEMM rate, bytes / bandwidth) at the profile's rates, a parent's the sum of its
  // children's (they run one after another), and its time over that floor.
  void write_breakdown(BenchContext& ctx) const {
    CsvTable t({"model", "phase", "name", "depth", "calls_per_step", "ms", "ms_min", "ms_max", "share_of_step", "flops",
                "achieved_tflops", "min_bytes", "floor_ms", "floor_bound", "time_over_floor", "steps", "attention",
                "expert_gemm", "layers", "hidden", "heads", "ffn", "seq", "vocab", "experts", "sequences"});
    const int es = int(dtype_size(ctx.dtype()));
    for (const auto& [moe, rows] : phases_) {
      const ModelShape shape = moe ? shape_ : shape_.dense();
      std::map<std::string, Work> phase_work;
      for (const auto& [phase, w] : gpt_step_phases(shape, sequences_, es)) phase_work[phase] = w;
      struct Counted {
        Work work;
        double floor_ms = 0;
        std::string bound;
      };
      std::map<std::string, Counted> counted;  // per path; children come after their parent: go backwards
      for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
        if (it->other) continue;
        if (auto w = phase_work.find(it->name); w != phase_work.end()) {
          Counted c{w->second, 0, ""};
          if (roofline_.hw) {
            const Roofline r = roofline(w->second, *roofline_.hw, es == 2, roofline_.rate_scale, it->ms.median);
            c.floor_ms = r.floor_ms;
            c.bound = r.bound;
          }
          counted[it->path] = c;
          continue;
        }
        Counted sum{{}, 0, "sum of its phases'"};
        bool any = false;
        for (const auto& [path, c] : counted)
          if (path.size() > it->path.size() && path.compare(0, it->path.size() + 1, it->path + "/") == 0 &&
              path.find('/', it->path.size() + 1) == std::string::npos) {
            sum.work.flops += c.work.flops;
            sum.work.bytes += c.work.bytes;
            sum.floor_ms += c.floor_ms;
            any = true;
          }
        if (any) counted[it->path] = sum;
      }
      std::vector<const RangeRow*> leaves;
      for (const RangeRow& r : rows) {
        const auto c = counted.find(r.path);
        std::vector<std::string> work(6, r.other ? "n/a (unattributed)" : "n/a (not counted: no work of the paper's computation)");
        if (c != counted.end()) {
          const double ms = r.ms.median;
          work = {fmt(c->second.work.flops), ms > 0 ? fmt(c->second.work.flops / (ms * 1e-3) / 1e12, 4) : "n/a (no time)",
                  fmt(c->second.work.bytes), fmt(c->second.floor_ms, 5), c->second.bound,
                  ms > 0 && c->second.floor_ms > 0 ? fmt(ms / c->second.floor_ms, 4) : "n/a (no time)"};
          if (!roofline_.hw) work[3] = work[4] = work[5] = "n/a (no profile of this device: --roofline-profile)";
        }
        std::vector<std::string> row = {moe ? "moe" : "dense", r.path, r.name, std::to_string(r.depth), std::to_string(r.calls),
                                        fmt(r.ms.median), fmt(r.ms.min), fmt(r.ms.max), fmt(r.share, 4)};
        row.insert(row.end(), work.begin(), work.end());
        for (const std::string& cell :
             {std::to_string(r.ms.samples), std::string(attention_kernel_name(attention_)),
              std::string(moe ? expert_gemm_name(expert_gemm_) : "n/a"), std::to_string(shape.layers),
              std::to_string(shape.hidden), std::to_string(shape.heads), std::to_string(shape.ffn), std::to_string(shape.seq),
              std::to_string(shape.vocab), std::to_string(moe ? shape.experts : 0), std::to_string(sequences_)})
          row.push_back(cell);
        t.add_row(row);
        if (r.leaf) leaves.push_back(&r);
      }
      std::sort(leaves.begin(), leaves.end(), [](const RangeRow* a, const RangeRow* b) { return a->ms.median > b->ms.median; });
      std::printf("gpt.step %-5s eager step by phase:", moe ? "moe" : "dense");
      for (std::size_t i = 0; i < std::min<std::size_t>(4, leaves.size()); ++i) {
        const RangeRow& r = *leaves[i];
        std::printf("  %s %.1f%%", r.path.substr(r.path.find('/') + 1).c_str(), 100 * r.share);
        if (const auto c = counted.find(r.path); c != counted.end() && c->second.floor_ms > 0)
          std::printf(" (%.2gx its floor)", r.ms.median / c->second.floor_ms);
      }
      std::printf("\n");
    }
    t.write(ctx.opts.out_dir + "/gpt/step_breakdown.csv", ctx.provenance);
  }

  // gpt/step_kernels.csv (--kernels): per model the ops of as many eager steps by phase
  // (the innermost timed range they were launched in) and kernel, the slowest first; or, where
  // the log could not run, one row per model saying why.
  void write_kernels(BenchContext& ctx, const std::map<std::string, Spread>& measured) const {
    if (!kernels_) return;
    std::vector<std::string> cols = {"model"};
    for (const auto& c : kernel_columns("step")) cols.push_back(c);
    for (const char* c : {"attention", "expert_gemm", "layers", "hidden", "heads", "ffn", "seq", "vocab", "experts", "sequences"})
      cols.push_back(c);
    CsvTable t(cols);
    for (const bool moe : {false, true}) {
      if (!phases_.count(moe)) continue;
      const ModelShape shape = moe ? shape_ : shape_.dense();
      const std::vector<std::string> tail = {
          attention_kernel_name(attention_), moe ? expert_gemm_name(expert_gemm_) : "n/a", std::to_string(shape.layers),
          std::to_string(shape.hidden), std::to_string(shape.heads), std::to_string(shape.ffn), std::to_string(shape.seq),
          std::to_string(shape.vocab), std::to_string(moe ? shape.experts : 0), std::to_string(sequences_)};
      const auto found = kernels_by_model_.find(moe);
      const KernelLogRuns log = found != kernels_by_model_.end() ? found->second : KernelLogRuns{{}, kernel_log_failure_, {}};
      for (auto& row : kernel_cells(log)) {
        row.insert(row.begin(), moe ? "moe" : "dense");
        row.insert(row.end(), tail.begin(), tail.end());
        t.add_row(row);
      }
      std::printf("gpt.step %-5s %s\n", moe ? "moe" : "dense", slowest_kernels(log).c_str());
      const auto step = measured.find(key(moe));
      if (step_captured(moe))
        std::printf("gpt.step %-5s the measured steps were replayed from a graph, the logged ones eager: their spans "
                    "are not set side by side\n", moe ? "moe" : "dense");
      else if (step != measured.end())
        std::printf("gpt.step %-5s %s\n", moe ? "moe" : "dense", logged_against_measured(log, step->second.median).c_str());
    }
    t.write(ctx.opts.out_dir + "/gpt/step_kernels.csv", ctx.provenance);
  }

  // --kernels: as many eager steps more, op by op, of a fresh trainer (eager, whatever the measured
  // one captured), their ranges timed into a breakdown of their own only to give each op its phase.
  // After every measured step: CUPTI, once attached, can cost none of them. A failure stops the
  // log for the other model too.
  void log_kernels(BenchContext& ctx, bool moe) {
    if (!kernel_log_failure_.empty()) return;
    make_trainer(ctx, moe);
    KernelLogRuns log = log_kernel_runs(ctx.device, ctx.repetitions(), [&](Breakdown& phases) {
      trainer_->set_breakdown(&phases);
      trainer_->step();
      trainer_->set_breakdown(nullptr);
    });
    kernel_log_failure_ = log.failure;
    if (log.failure.empty()) kernels_by_model_[moe] = std::move(log);
  }

  // A fresh trainer of the model, its steps eager, after its warm-up: one step, then, where its
  // GEMMs make cuBLASLt plans (CUDA), steps until kQuietSteps in a row make no plan, time no
  // algorithm and take no block from the system. A training step's routing moves, so for a few
  // steps its expert GEMMs meet shapes of new buckets, each a plan and a timing that waits on the
  // device (kernels/batched_gemm_cuda.cu), and its buffers outgrow their size classes: a run of
  // thousands of steps pays that once, and the measured steps should not.
  // Returns the warm-up's steps.
  int make_trainer(BenchContext& ctx, bool moe) {
    trainer_.reset();
    GptConfig model = layout_model(shape_, layout(moe), ctx.dtype());
    model.attention = attention_;
    model.attention_panel_rows = panel_rows_;
    model.moe.expert_gemm = expert_gemm_;
    trainer_ = std::make_unique<GptTrainer>(ctx.world, ctx.device, ctx.backend(), layout(moe), model, sequences_, 1);
    trainer_moe_ = moe;
    const auto plans_so_far = [] {
      const BatchedGemmAlgoStats s = batched_gemm_algo_stats();
      return s.plans + s.timed;
    };
    const std::size_t first_plans = plans_so_far();
    trainer_->step();
    int steps = 1;
    if (plans_so_far() != first_plans)
      for (int quiet = 0; quiet < kQuietSteps && steps < kMaxWarmupSteps; ++steps) {
        const std::size_t plans = plans_so_far();
        const std::int64_t blocks = trainer_->pool_blocks_taken();
        trainer_->step();
        quiet = plans_so_far() == plans && trainer_->pool_blocks_taken() == blocks ? quiet + 1 : 0;
      }
    return steps;
  }

  void run(benchmark::State& st, BenchContext& ctx, bool moe) {
    if (!trainer_ || trainer_moe_ != moe) {
      warmup_steps_[moe] = make_trainer(ctx, moe);
      // Where the time goes: eager steps timed range by range, before any capture (a replayed
      // step times nothing). They are not the measured steps.
      std::vector<std::vector<Breakdown::PathTotal>> steps;
      for (int r = 0; r < ctx.repetitions(); ++r) {
        Breakdown b;
        trainer_->set_breakdown(&b);
        trainer_->step();
        ctx.device.synchronize();
        trainer_->set_breakdown(nullptr);
        steps.push_back(b.path_totals());
      }
      phases_[moe] = range_tree(steps);
      if (step_captured(moe)) {
        trainer_->capture_step();  // a step more, then the capture
        graph_nodes_[moe] = trainer_->graph_nodes();
      }
      ctx.device.synchronize();
    }
    trainer_->reset_peak_bytes();
    const BatchedGemmAlgoStats before = batched_gemm_algo_stats();
    const std::int64_t blocks_before = trainer_->pool_blocks_taken();
    ctx.profile_begin();
    for (auto _ : st) ctx.time_iteration(st, trainer_->stream(), [&] { trainer_->step(); });
    ctx.profile_end();
    ctx.device.synchronize();
    const BatchedGemmAlgoStats after = batched_gemm_algo_stats();
    plans_in_measured_[moe].plans += after.plans - before.plans;
    plans_in_measured_[moe].timed += after.timed - before.timed;
    pool_blocks_in_measured_[moe] += std::int64_t(ctx.rt.max(double(trainer_->pool_blocks_taken() - blocks_before)));
    const double routed = double(trainer_->expert_rows());  // the last measured step's, on the busiest rank
    computed_over_routed_[moe] = ctx.rt.max(routed > 0 ? double(trainer_->expert_computed_rows()) / routed : 0.0);
    peak_mib_[moe] = std::max(peak_mib_[moe], double(trainer_->peak_bytes()) / (1 << 20));
  }

  std::optional<int> sequences_opt_, panel_rows_opt_;
  std::string reference_, roofline_path_, attention_opt_, step_graph_opt_, expert_gemm_opt_;
  bool captured_ = false;  // steps replayed from a graph where the model allows (dense; MoE with segmented experts)
  std::map<bool, std::size_t> graph_nodes_;  // per model
  static constexpr int kQuietSteps = 3, kMaxWarmupSteps = 40;
  std::map<bool, int> warmup_steps_;         // per model: its measured trainer's
  ExpertGemm expert_gemm_ = ExpertGemm::grouped;
  AttentionKernel attention_ = AttentionKernel::materialized;
  int panel_rows_ = 0;
  std::map<bool, double> peak_mib_;  // per model, over the measured steps
  std::map<bool, BatchedGemmAlgoStats> plans_in_measured_;  // per model: plans made and timed in them
  std::map<bool, std::int64_t> pool_blocks_in_measured_;    // per model: blocks taken from the system in them (busiest rank)
  std::map<bool, double> computed_over_routed_;             // per model: its experts' rows computed over routed; 0: untold
  std::map<bool, std::vector<RangeRow>> phases_;  // per model: its eager steps' ranges
  bool kernels_ = false;
  std::string kernel_log_failure_;                    // why --kernels logs nothing
  std::map<bool, KernelLogRuns> kernels_by_model_;
  RooflineProfile roofline_;
  std::map<std::string, Reference> reference_rows_;
  ModelShape shape_;  // its MoE variant: top-1, dropless, an MoE layer on every other FFN
  int sequences_ = 2;
  std::unique_ptr<GptTrainer> trainer_;
  bool trainer_moe_ = false;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::GptStepBench>(argc, argv); }
