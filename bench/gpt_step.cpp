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
#include "bench/gpt_step_csv.h"
#include "harness/bench.h"
#include "harness/kernel_table.h"
#include "harness/range_roofline.h"
#include "harness/torch_reference.h"
#include "harness/range_tree.h"
#include "models/csv_rows.h"
#include "models/paper_specs.h"
#include "models/roofline.h"

namespace moebench {
namespace {

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
    add_choice(app, "--expert-gemm", expert_gemm_opt_, expert_gemm_names(),
               "The MoE model's experts (moebench_moe_layer's routes; segmented keeps the counts on the device) "
               "(default: padded on cuda where the FFN width is a multiple of 8, else grouped)");
    add_flag(app, "--kernels", rec_.log_kernels,
             "Also run as many eager steps as repetitions op by op (on cuda every kernel, copy and memset, through "
             "CUPTI) into gpt/step_kernels.csv, each under the phase that launched it");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    if (ctx.world.size() != 1)
      return "gpt.step measures one device, so it runs on one rank; got " + std::to_string(ctx.world.size()) +
             " (launch it with 1 rank: --ranks 1)";
    switch (ctx.scale()) {
      case Scale::tiny:
        rec_.shape = {.layers = 2, .hidden = 32, .ffn = 128, .heads = 4, .seq = 16, .vocab = 64, .experts = 4, .moe_every = 2};
        rec_.sequences = 2;
        break;
      case Scale::local:
        rec_.shape = {.layers = 4, .hidden = 256, .ffn = 1024, .heads = 4, .seq = 128, .vocab = 512, .experts = 8, .moe_every = 2};
        rec_.sequences = 4;
        break;
      case Scale::paper:
        rec_.shape = model_spec("gpt3-medium").shape;
        rec_.shape.experts = 8;  // one device: 12 MoE layers of 8 experts (issue's target), not PPMoE's 64
        rec_.sequences = 2;
        break;
    }
    rec_.sequences = sequences_opt_.value_or(rec_.sequences);
    rec_.attention = attention_opt_.empty()
                     ? (ctx.backend() == Backend::cuda ? AttentionKernel::blocked : AttentionKernel::materialized)
                     : *parse_attention_kernel(attention_opt_);
    if (panel_rows_opt_ && rec_.attention != AttentionKernel::blocked)
      return "--attention-panel-rows: sets the blocked attention's panels; this run's attention is " +
             std::string(attention_kernel_name(rec_.attention)) + " (add --attention blocked)";
    if (rec_.attention == AttentionKernel::cudnn) {
      Exec ex;
      ex.backend = ctx.backend();
      SdpaShape s;
      s.head_dim = rec_.shape.hidden / rec_.shape.heads;
      s.t = ctx.dtype();
      if (const std::string why = sdpa_unsupported(ex, s); !why.empty()) return "--attention cudnn: " + why;
    }
    rec_.panel_rows = panel_rows_opt_.value_or(GptConfig{}.attention_panel_rows);
    rec_.captured = step_graph_opt_.empty() ? ctx.backend() == Backend::cuda : step_graph_opt_ == "captured";
    try {
      rec_.roofline = load_roofline_profile("--roofline-profile", roofline_path_, ctx.provenance.backend, ctx.provenance.device,
                                        std::string(dtype_name(ctx.dtype())), 1,
                                        int(std::thread::hardware_concurrency()));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    for (bool moe : {false, true})
      if (auto e = validate_layout(gpt_step_layout(moe), rec_.shape, 1)) return e;
    MoEConfig experts = layout_model(rec_.shape, gpt_step_layout(true), ctx.dtype()).moe;
    rec_.expert_gemm = expert_gemm_opt_.empty() ? default_expert_gemm(ctx.backend(), experts.ffn)
                                            : *parse_expert_gemm(expert_gemm_opt_);
    experts.expert_gemm = rec_.expert_gemm;
    if (auto e = experts.validate_for(ctx.backend())) return e;
    if (reference_.empty()) return std::nullopt;
    const std::string dtype(dtype_name(ctx.dtype()));
    return read_torch_csv({reference_, "ms_per_step", "model", "; run torch_step.py with --dtype " + dtype}, ctx.dtype(),
                          [&](const TorchRun& r) -> std::optional<std::string> {
      auto whole = [&](const char* col) { return std::stoi(r.cell(col)); };
      const ModelShape& b = rec_.shape;
      if (whole("sequences") == rec_.sequences && whole("layers") == b.layers && whole("hidden") == b.hidden &&
          whole("heads") == b.heads && whole("ffn") == b.ffn && whole("seq") == b.seq && whole("vocab") == b.vocab &&
          whole("experts") == (r.cell("model") == "moe" ? b.experts : 0))
        return std::nullopt;
      return "another model or batch (" + r.cell("layers") + " layers, hidden " + r.cell("hidden") + ", " +
             r.cell("experts") + " experts, " + r.cell("sequences") + " sequences of " + r.cell("seq") +
             "); run both at the same --scale and --sequences";
    }, &rec_.reference);
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/gpt", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (bool moe : {false, true})
      ctx.add(key(moe), 1, [this, &ctx, moe](benchmark::State& st) { run(st, ctx, moe); });
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    if (rec_.log_kernels)
      for (const bool moe : {false, true})
        if (rec_.phases.count(moe)) log_kernels(ctx, moe);
    trainer_.reset();
    std::map<bool, Spread> ms;  // per model
    for (const auto& r : runs)
      if (!r.error) ms[r.name == key(true)] = r.time_ms();
    write_step_csv(ctx, rec_, ms);
    write_step_breakdown(ctx, rec_);
    write_step_kernels(ctx, rec_, ms);
    return 0;
  }

 private:
  static std::string key(bool moe) { return std::string("gpt_step/") + (moe ? "moe" : "dense"); }
  // --kernels: as many eager steps more, op by op, of a fresh trainer (eager, whatever the measured
  // one captured), their ranges timed into a breakdown of their own only to give each op its phase.
  // After every measured step: CUPTI, once attached, can cost none of them. A failure stops the
  // log for the other model too.
  void log_kernels(BenchContext& ctx, bool moe) {
    if (!rec_.kernel_log_failure.empty()) return;
    make_trainer(ctx, moe);
    KernelLogRuns log = log_kernel_runs(ctx.device, ctx.repetitions(), [&](Breakdown& phases) {
      trainer_->set_breakdown(&phases);
      trainer_->step();
      trainer_->set_breakdown(nullptr);
    });
    rec_.kernel_log_failure = log.failure;
    if (log.failure.empty()) rec_.kernels[moe] = std::move(log);
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
    GptConfig model = layout_model(rec_.shape, gpt_step_layout(moe), ctx.dtype());
    model.attention = rec_.attention;
    model.attention_panel_rows = rec_.panel_rows;
    model.moe.expert_gemm = rec_.expert_gemm;
    trainer_ = std::make_unique<GptTrainer>(ctx.world, ctx.device, ctx.backend(), gpt_step_layout(moe), model, rec_.sequences, 1);
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
      rec_.warmup_steps[moe] = make_trainer(ctx, moe);
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
      rec_.phases[moe] = range_tree(steps);
      if (rec_.step_captured(moe)) {
        trainer_->capture_step();  // a step more, then the capture
        rec_.graph_nodes[moe] = trainer_->graph_nodes();
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
    rec_.plans_in_measured[moe].plans += after.plans - before.plans;
    rec_.plans_in_measured[moe].timed += after.timed - before.timed;
    rec_.pool_blocks_in_measured[moe] += std::int64_t(ctx.rt.max(double(trainer_->pool_blocks_taken() - blocks_before)));
    const double routed = double(trainer_->expert_rows());  // the last measured step's, on the busiest rank
    rec_.computed_over_routed[moe] = ctx.rt.max(routed > 0 ? double(trainer_->expert_computed_rows()) / routed : 0.0);
    rec_.peak_mib[moe] = std::max(rec_.peak_mib[moe], double(trainer_->peak_bytes()) / (1 << 20));
  }

  std::optional<int> sequences_opt_, panel_rows_opt_;
  std::string reference_, roofline_path_, attention_opt_, step_graph_opt_, expert_gemm_opt_;
  static constexpr int kQuietSteps = 3, kMaxWarmupSteps = 40;
  GptStepRecord rec_;
  std::unique_ptr<GptTrainer> trainer_;
  bool trainer_moe_ = false;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::GptStepBench>(argc, argv); }
