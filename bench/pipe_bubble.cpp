// moebench_pipe_bubble (pipe.bubble; 002 Sec. 8.3, the zero-bubble schedules): a model of
// residual MLP blocks split into P pipeline stages, one per rank, trained one step at a time
// by the pipeline engine with GPipe, 1F1B and ZB-H1 over M micro-batches of a fixed
// mini-batch, with and without recomputation. Per stage: the bubble measured from the stage's
// own events (1 - busy / step time), the simulator's prediction from the same table fed with
// the op times this run measured (and the measured send time), the same table replayed with
// every op's own measured duration (what op-to-op variation costs, which mean times hide), and
// (P - 1) / (M + P - 1); throughput and peak activation memory per schedule. On the CPU backend
// with more stages than the machine has cores, the simulator and the replay run at most as many
// ops at once as there are cores (column simulator_processors). Writes
// <out>/pipe/bubble.csv.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>
#include "runtime/host_copy.h"
#include "harness/bench.h"
#include "kernels/gemm.h"
#include "models/pipeline_simulator.h"
#include "moe/init.h"
#include "pipeline/mlp_stage.h"
#include "pipeline/pipeline_engine.h"

namespace moebench {
namespace {

constexpr double kSimulatorTarget = 0.05;  // |measured - simulated| step time, relative
constexpr double kZeroBubbleTarget = 0.4;  // ZB-H1's bubble over 1F1B's

struct Case {
  PipelineScheduleKind kind;
  int micro_batches = 1;
  bool recompute = false;
  std::string name() const {
    return "pipe_bubble/" + schedule_name(kind) + "/M" + std::to_string(micro_batches) + (recompute ? "/recompute" : "");
  }
};

// One repetition, every stage: busy ms, step ms, mean F, B, W ms, peak activation bytes.
constexpr int kFields = 6;

class PipeBubbleBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_pipe_bubble"; }
  std::string description() const override {
    return "Pipeline bubbles of GPipe, 1F1B and ZB-H1: measured per stage vs the schedule simulator vs (P-1)/(M+P-1), "
           "throughput vs micro-batch count, activation memory with and without recomputation (one stage per rank).";
  }
  void add_options(CLI::App& app) override {
    add_choices(app, "--schedules", schedule_names_, {"gpipe", "1f1b", "zb-h1"}, "Schedules (default: all three)");
    add_wholes(app, "--micro-batches", micro_opt_, 1, 1 << 16, "Micro-batch counts M (default by scale)");
    add_whole(app, "--mini-batch", mini_opt_, 1, 1 << 24, "Rows of the mini-batch, split into M micro-batches (default by scale)");
    add_whole(app, "--layers", layers_opt_, 1, 1 << 12, "MLP blocks in the model, split evenly over the stages (default by scale)");
    add_whole(app, "--hidden", hidden_opt_, 1, 1 << 16, "Block width (default by scale)");
    add_whole(app, "--ffn", ffn_opt_, 1, 1 << 18, "Block inner width (default by scale)");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    const int P = stages_ = ctx.world.size();
    std::vector<int> micro;
    switch (ctx.scale()) {
      case Scale::tiny: micro = {1, 2, 4}; mini_ = 16; layers_ = 4; hidden_ = 16; ffn_ = 32; iters_warm_ = 1; break;
      case Scale::local: micro = {1, 2, 4, 8, 16}; mini_ = 256; layers_ = 8; hidden_ = 256; ffn_ = 1024; iters_warm_ = 1; break;
      case Scale::paper:  // GPT-3 Medium's width and depth (000), 4 sequences of 2048 tokens
        micro = {1, 2, 4, 8, 16, 32}; mini_ = 8192; layers_ = 24; hidden_ = 1024; ffn_ = 4096; iters_warm_ = 2; break;
    }
    if (ctx.dtype() != DType::f32)
      return "--dtype: " + std::string(dtype_name(ctx.dtype())) +
             ": the pipeline stages keep fp32 weights and gradients; allowed: fp32";
    micro_ = micro_opt_.empty() ? micro : micro_opt_;
    std::sort(micro_.begin(), micro_.end());
    micro_.erase(std::unique(micro_.begin(), micro_.end()), micro_.end());
    mini_ = mini_opt_.value_or(mini_);
    layers_ = layers_opt_.value_or(layers_);
    hidden_ = hidden_opt_.value_or(hidden_);
    ffn_ = ffn_opt_.value_or(ffn_);
    if (layers_ % P != 0)
      return "--layers: " + std::to_string(layers_) + " blocks do not split evenly over " + std::to_string(P) +
             " pipeline stages (one per rank); allowed: a multiple of " + std::to_string(P);
    for (int M : micro_) {
      if (auto e = validate_pipeline_shape(P, M)) return e;
      if (mini_ % M != 0)
        return "--micro-batches: " + std::to_string(M) + " does not divide the mini-batch of " + std::to_string(mini_) +
               " rows (--mini-batch); allowed: its divisors";
    }
    if (schedule_names_.empty()) schedule_names_ = {"gpipe", "1f1b", "zb-h1"};
    // Weights and gradients, and at most a whole mini-batch's activations (GPipe) plus buffers.
    const std::uint64_t per_stage = layers_ / P, wts = 4ull * per_stage * hidden_ * ffn_ * 4;
    const std::uint64_t act = 4ull * mini_ * per_stage * (3ull * hidden_ + 3ull * ffn_) + 16ull * mini_ * hidden_;
    return ctx.check_fits(wts + act, "--mini-batch/--layers/--hidden/--ffn");
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/pipe", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (int M : micro_) send_ms_[M] = measure_send_ms(ctx, mini_ / M);
    for (const auto& n : schedule_names_)
      for (int M : micro_)
        for (bool re : {false, true}) {
          const Case c{*parse_schedule(n), M, re};
          ctx.add(c.name(), 1, [this, &ctx, c](benchmark::State& st) { run(st, ctx, c); });
        }
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    fixture_.reset();
    if (ctx.rt.rank() != 0) return 0;
    const int P = ctx.world.size();
    CsvTable t({"schedule", "stages", "micro_batches", "rows_per_micro_batch", "recompute", "stage", "f_ms", "b_ms", "w_ms",
                "send_ms", "busy_ms", "idle_ms", "step_ms", "step_ms_min", "step_ms_max", "step_ms_reps", "measured_bubble",
                "measured_bubble_min", "measured_bubble_max", "simulated_bubble", "simulated_step_ms",
                "measured_over_simulated_step", "simulator_status", "replayed_bubble", "replayed_step_ms",
                "measured_over_replayed_step", "simulator_processors", "closed_form_bubble", "tokens_per_s",
                "tokens_per_s_min", "tokens_per_s_max", "tokens_per_s_reps", "peak_activation_bytes", "repetitions"});
    const int processors = shared_processors(ctx);
    // By case name: the stages' mean measured bubble (share of the step) and idle ms -- the
    // bubble's size, what ZB-H1's "a third of 1F1B's" is about (a shorter step makes the same
    // idle time a larger share).
    std::map<std::string, double> mean_bubble, mean_idle_ms;
    std::map<std::string, StageOpTimes> stage0_times;
    for (const RunRecord& r : runs) {
      if (r.error || !samples_.count(r.name)) continue;
      const Case& c = cases_.at(r.name);
      const auto& reps = samples_.at(r.name);
      const Spread step = r.time_ms();
      std::vector<double> tokens_per_s;  // per repetition, in the order the rounds ran
      for (double ms : r.ms()) tokens_per_s.push_back(mini_ / (ms / 1e3));
      auto field = [&](int stage, int f) {
        std::vector<double> v;
        for (const auto& rep : reps) v.push_back(rep[stage * kFields + f]);
        return spread_of(v);
      };
      std::vector<StageOpTimes> times;
      for (int s = 0; s < P; ++s)
        times.push_back({field(s, 2).median, field(s, 3).median, field(s, 4).median});
      // Where the backward is whole its measured time is B and W together: hand it over as b.
      std::vector<StageOpTimes> sim_times = times;
      if (c.kind != PipelineScheduleKind::zb_h1)
        for (auto& x : sim_times) x.w = 0;
      const auto table = make_pipeline_schedule(c.kind, P, c.micro_batches);
      const double send = send_ms_.at(c.micro_batches);
      const PipelineSimulation sim = simulate_pipeline(table, sim_times, send, false, processors);
      const double closed = ideal_bubble_fraction(P, c.micro_batches);
      const double ratio = step.median / sim.makespan;
      const bool ok = std::abs(ratio - 1) <= kSimulatorTarget;
      // Each repetition replayed with its own ops' durations, against its own step time.
      std::vector<double> replayed, over_replayed;
      std::vector<std::vector<double>> replayed_bubbles(P);
      const auto& op_reps = op_ms_.at(r.name);
      for (std::size_t i = 0; i < op_reps.size() && i < reps.size(); ++i) {
        const PipelineSimulation made = replay_pipeline(table, split_by_stage(table, op_reps[i]), send, processors);
        replayed.push_back(made.makespan);
        over_replayed.push_back(reps[i][1] / made.makespan);  // every stage holds the step time
        for (int s = 0; s < P; ++s) replayed_bubbles[s].push_back(made.bubble_fraction(s));
      }
      const Spread replay = spread_of(replayed), replay_ratio = spread_of(over_replayed);
      const int rows = mini_ / c.micro_batches;
      double bubble_sum = 0, idle_sum = 0;
      for (int s = 0; s < P; ++s) {
        std::vector<double> bubbles;
        for (const auto& rep : reps) bubbles.push_back(1 - rep[s * kFields] / rep[s * kFields + 1]);
        const Spread b = spread_of(bubbles);
        bubble_sum += b.median;
        std::vector<double> idles;
        for (const auto& rep : reps) idles.push_back(rep[s * kFields + 1] - rep[s * kFields]);
        const double idle = spread_of(idles).median;
        idle_sum += idle;
        t.add_row({schedule_name(c.kind), std::to_string(P), std::to_string(c.micro_batches), std::to_string(rows),
                   c.recompute ? "yes" : "no", std::to_string(s), fmt(times[s].f), fmt(times[s].b),
                   c.kind == PipelineScheduleKind::zb_h1 ? fmt(times[s].w) : "in b", fmt(send), fmt(field(s, 0).median),
                   fmt(idle),
                   fmt(step.median), fmt(step.min), fmt(step.max), repetitions_cell(r.ms()), fmt(b.median, 4),
                   fmt(b.min, 4), fmt(b.max, 4),
                   fmt(sim.bubble_fraction(s), 4), fmt(sim.makespan), fmt(ratio, 4),
                   std::string(ok ? "within " : "NOT within ") + fmt(kSimulatorTarget * 100, 2) + "%",
                   fmt(spread_of(replayed_bubbles[s]).median, 4), fmt(replay.median), fmt(replay_ratio.median, 4),
                   processors > 0 ? std::to_string(processors) + " cores shared by the stages" : "one per stage",
                   fmt(closed, 4),
                   fmt(mini_ / (step.median / 1e3)), fmt(mini_ / (step.max / 1e3)), fmt(mini_ / (step.min / 1e3)),
                   repetitions_cell(tokens_per_s), fmt(field(s, 5).max, 10), std::to_string(step.samples)});
      }
      mean_bubble[r.name] = bubble_sum / P;
      mean_idle_ms[r.name] = idle_sum / P;
      stage0_times[r.name] = times[0];
      std::printf("%-34s step %8.2f ms  bubble %.3f (simulated %.3f, (P-1)/(M+P-1) %.3f)  step / simulated %.3f (%s)"
                  "  step / replayed %.3f\n",
                  r.name.c_str(), step.median, bubble_sum / P, sim.bubble_fraction(), closed, ratio,
                  ok ? "within 5%" : "NOT within 5%", replay_ratio.median);
    }
    // ZB-H1 against 1F1B: measured at this P, and at P = 4, M = 8 by the simulator fed with
    // this run's op times (stage 0's, for every stage).
    for (int M : micro_) {
      const std::string zb = Case{PipelineScheduleKind::zb_h1, M, false}.name(), ofob = Case{PipelineScheduleKind::one_f_one_b, M, false}.name();
      if (!mean_idle_ms.count(zb) || !mean_idle_ms.count(ofob) || mean_idle_ms[ofob] <= 0) continue;
      const double r = mean_idle_ms[zb] / mean_idle_ms[ofob];
      std::printf("zb-h1 / 1f1b idle time per stage, P=%d M=%d: measured %.3f (target <= %.1f: %s; ZB-H1's claim 1/3); "
                  "as shares of their steps %.3f\n",
                  P, M, r, kZeroBubbleTarget, r <= kZeroBubbleTarget ? "met" : "NOT met", mean_bubble[zb] / mean_bubble[ofob]);
      if (M == 8 && P != 4) {
        const StageOpTimes zt = stage0_times[zb], ot = stage0_times[ofob];
        const auto z4 = simulate_pipeline(make_pipeline_schedule(PipelineScheduleKind::zb_h1, 4, 8), {zt}, send_ms_.at(M));
        const auto o4 = simulate_pipeline(make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, 4, 8), {{ot.f, ot.b, 0}},
                                          send_ms_.at(M));
        double z_idle = 0, o_idle = 0;
        for (int s = 0; s < 4; ++s) z_idle += z4.idle(s), o_idle += o4.idle(s);
        const double r4 = z_idle / o_idle;
        std::printf("zb-h1 / 1f1b idle time per stage, P=4 M=8, simulated from these op times: %.3f (target <= %.1f: %s); "
                    "as shares of their steps %.3f\n",
                    r4, kZeroBubbleTarget, r4 <= kZeroBubbleTarget ? "met" : "NOT met",
                    z4.bubble_fraction() / o4.bubble_fraction());
      }
    }
    t.write(ctx.opts.out_dir + "/pipe/bubble.csv", ctx.provenance);
    return 0;
  }

 private:
  // How many ops the stages can run at once: on the CPU backend the ranks of one machine share
  // its cores (one BLAS thread per op, as the experiments launch it), and a stage waiting for a
  // core is not busy but not idle by choice either -- the simulator holds it to that; 0 where
  // every stage has a processor of its own (a GPU each, or cores enough). Ranks over several
  // machines are taken as a processor each.
  static int shared_processors(const BenchContext& ctx) {
    if (ctx.backend() != Backend::cpu || ctx.rt.local_size() != ctx.rt.world()) return 0;
    const int cores = int(std::thread::hardware_concurrency()) / std::max(1, cpu_blas_threads());
    return cores >= 1 && cores < ctx.world.size() ? cores : 0;
  }

  // Half a round trip of `rows` rows of activations between neighbouring stages the way the
  // engine moves them -- received on a compute stream, sent on a stream of its own after an
  // event -- so the thread hand-offs are in it; the median of 20 (the slowest pair's); 0 on one
  // rank.
  double measure_send_ms(BenchContext& ctx, int rows) {
    const int P = ctx.world.size(), me = ctx.world.rank();
    if (P == 1) return 0;
    const std::size_t count = std::size_t(rows) * hidden_;
    Buffer a = ctx.alloc.allocate(count * 4, MemTag::buffers), b = ctx.alloc.allocate(count * 4, MemTag::buffers);
    Stream compute = ctx.device.create_stream("compute"), send = ctx.device.create_stream("send");
    ctx.device.fill_zero(a.data(), a.bytes(), compute);
    compute.synchronize();
    const int peer = me % 2 == 0 ? me + 1 : me - 1;
    auto send_after_compute = [&](const Buffer& buf) {
      Event ready(ctx.backend());
      ready.record(compute);
      ready.make_wait(send);
      ctx.world.send(buf.data(), count, DType::f32, peer, send);
    };
    std::vector<double> ms;
    for (int i = 0; i < 21; ++i) {
      ctx.world.barrier(ctx.device.default_stream());
      const auto start = std::chrono::steady_clock::now();
      if (peer < P) {
        if (me % 2 == 0) {
          send_after_compute(a);
          ctx.world.recv(b.data(), count, DType::f32, peer, compute);
        } else {
          ctx.world.recv(b.data(), count, DType::f32, peer, compute);
          send_after_compute(b);
        }
      }
      compute.synchronize();
      send.synchronize();
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (i > 0) ms.push_back(ctx.rt.max(me % 2 == 0 && peer < P ? t / 2 : 0));  // the first warms the path up
      else ctx.rt.max(0);
    }
    return spread_of(ms).median;
  }

  // Every stage's op durations of one step, in the table's order, stage after stage (the
  // same vector on every rank).
  std::vector<double> all_op_ms(BenchContext& ctx, const Case& c, const PipelineStepRecord& rec) {
    const auto table = make_pipeline_schedule(c.kind, stages_, c.micro_batches);
    std::size_t offset = 0, total = 0;
    for (int s = 0; s < stages_; ++s) {
      if (s < ctx.world.rank()) offset += table.steps[s].size();
      total += table.steps[s].size();
    }
    std::vector<double> all(total, 0.0);
    for (std::size_t i = 0; i < rec.ops.size(); ++i) all.at(offset + i) = rec.ops[i].end - rec.ops[i].start;
    ctx.rt.sum(all);
    return all;
  }

  static std::vector<std::vector<double>> split_by_stage(const PipelineSchedule& table, const std::vector<double>& all) {
    std::vector<std::vector<double>> per(table.stages);
    std::size_t i = 0;
    for (int s = 0; s < table.stages; ++s)
      for (std::size_t k = 0; k < table.steps[s].size(); ++k) per[s].push_back(all.at(i++));
    return per;
  }

  struct Fixture {
    std::string key;
    std::unique_ptr<TrackingAllocator> alloc;  // its own: the step's peaks alone
    std::unique_ptr<MlpStage> stage;
    std::unique_ptr<PipelineEngine> engine;
    Stream compute, send;
    std::vector<Buffer> inputs, outputs, grads;
  };

  Fixture& fixture(BenchContext& ctx, const Case& c) {
    const std::string key = c.name();
    if (fixture_ && fixture_->key == key) return *fixture_;
    fixture_.reset();
    auto f = std::make_unique<Fixture>();
    f->key = key;
    const int P = ctx.world.size(), s = ctx.world.rank(), per = layers_ / P, M = c.micro_batches, rows = mini_ / M;
    f->alloc = std::make_unique<TrackingAllocator>(ctx.backend(), ctx.device.default_stream());
    MlpStageConfig cfg{hidden_, ffn_, per, s * per};
    cfg.recompute = c.recompute;
    f->compute = ctx.device.create_stream("compute");
    f->send = ctx.device.create_stream("send");
    f->stage = std::make_unique<MlpStage>(cfg, ctx.device, *f->alloc);
    f->stage->init(1, f->compute);
    f->engine = std::make_unique<PipelineEngine>(*f->stage, ctx.world, ctx.device, *f->alloc, f->compute, f->send);
    for (int j = 0; j < M; ++j) {
      if (s == 0)
        f->inputs.push_back(device_from_f32(ctx.device, *f->alloc, normal_vector(std::size_t(rows) * hidden_, 2, 100 + j, 1.f),
                                            DType::f32, MemTag::buffers));
      if (s == P - 1) {
        f->outputs.push_back(f->alloc->allocate(std::size_t(rows) * hidden_ * 4, MemTag::buffers));
        f->grads.push_back(device_from_f32(ctx.device, *f->alloc,
                                           normal_vector(std::size_t(rows) * hidden_, 2, 200 + j, 1.f / float(mini_)),
                                           DType::f32, MemTag::buffers));
      }
    }
    ctx.device.synchronize();
    fixture_ = std::move(f);
    for (int i = 0; i < iters_warm_; ++i) step(c);
    return *fixture_;
  }

  PipelineStepRecord step(const Case& c) {
    Fixture& f = *fixture_;
    std::vector<const void*> in, dy;
    std::vector<void*> out;
    for (auto& b : f.inputs) in.push_back(b.data());
    for (auto& b : f.outputs) out.push_back(b.data());
    for (auto& b : f.grads) dy.push_back(b.data());
    f.stage->zero_grad(f.compute);
    f.alloc->reset_peaks();
    return f.engine->run(make_pipeline_schedule(c.kind, stages_, c.micro_batches), mini_ / c.micro_batches, in, out, dy);
  }

  void run(benchmark::State& st, BenchContext& ctx, const Case& c) {
    cases_[c.name()] = c;
    Fixture& f = fixture(ctx, c);
    ctx.profile_begin();
    for (auto _ : st) {
      const PipelineStepRecord rec = step(c);
      const StageOpTimes t = rec.mean_op_ms();
      std::vector<double> mine(std::size_t(stages_) * kFields, 0.0);
      double* row = mine.data() + std::size_t(ctx.world.rank()) * kFields;
      row[0] = rec.busy_ms;
      row[1] = rec.makespan_ms;
      row[2] = t.f;
      row[3] = t.b;
      row[4] = t.w;
      row[5] = double(f.alloc->peak(MemTag::activations));
      ctx.rt.sum(mine);
      samples_[c.name()].push_back(mine);
      op_ms_[c.name()].push_back(all_op_ms(ctx, c, rec));
      st.SetIterationTime(rec.makespan_ms / 1e3);
    }
    ctx.profile_end();
  }

  std::vector<std::string> schedule_names_;
  std::vector<int> micro_opt_, micro_;
  std::optional<int> mini_opt_, layers_opt_, hidden_opt_, ffn_opt_;
  int mini_ = 1, layers_ = 1, hidden_ = 1, ffn_ = 1, iters_warm_ = 1, stages_ = 1;
  std::map<int, double> send_ms_;  // by micro-batch count: one micro-batch's activations
  std::map<std::string, Case> cases_;
  std::map<std::string, std::vector<std::vector<double>>> samples_;  // per case: per repetition, P x kFields
  std::map<std::string, std::vector<std::vector<double>>> op_ms_;    // per case: per repetition, every op's ms
  std::unique_ptr<Fixture> fixture_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::PipeBubbleBench>(argc, argv); }
