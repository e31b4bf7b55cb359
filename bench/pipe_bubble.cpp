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
#include <cmath>
#include <cstdio>
#include <map>
#include "runtime/host_copy.h"
#include "bench/pipe_bubble_csv.h"
#include "harness/bench.h"
#include "harness/processors.h"
#include "models/pipeline_simulator.h"
#include "moe/init.h"
#include "pipeline/mlp_stage.h"
#include "pipeline/pipeline_engine.h"

namespace moebench {
namespace {

class PipeBubbleBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_pipe_bubble"; }
  std::string description() const override {
    return "Pipeline bubbles of GPipe, 1F1B and ZB-H1: measured per stage vs the schedule simulator vs (P-1)/(M+P-1), "
           "throughput vs micro-batch count, activation memory with and without recomputation (one stage per rank).";
  }
  void add_options(CLI::App& app) override {
    add_choices(app, "--schedules", schedule_names_, schedule_names(), "Schedules (default: all)");
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
      case Scale::tiny: micro = {1, 2, 4}; rec_.mini = 16; layers_ = 4; hidden_ = 16; ffn_ = 32; iters_warm_ = 1; break;
      case Scale::local: micro = {1, 2, 4, 8, 16}; rec_.mini = 256; layers_ = 8; hidden_ = 256; ffn_ = 1024; iters_warm_ = 1; break;
      case Scale::paper:  // GPT-3 Medium's width and depth (000), 4 sequences of 2048 tokens
        micro = {1, 2, 4, 8, 16, 32}; rec_.mini = 8192; layers_ = 24; hidden_ = 1024; ffn_ = 4096; iters_warm_ = 2; break;
    }
    if (ctx.dtype() != DType::f32)
      return "--dtype: " + std::string(dtype_name(ctx.dtype())) +
             ": the pipeline stages keep fp32 weights and gradients; allowed: fp32";
    rec_.micro = micro_opt_.empty() ? micro : micro_opt_;
    std::sort(rec_.micro.begin(), rec_.micro.end());
    rec_.micro.erase(std::unique(rec_.micro.begin(), rec_.micro.end()), rec_.micro.end());
    rec_.mini = mini_opt_.value_or(rec_.mini);
    layers_ = layers_opt_.value_or(layers_);
    hidden_ = hidden_opt_.value_or(hidden_);
    ffn_ = ffn_opt_.value_or(ffn_);
    if (layers_ % P != 0)
      return "--layers: " + std::to_string(layers_) + " blocks do not split evenly over " + std::to_string(P) +
             " pipeline stages (one per rank); allowed: a multiple of " + std::to_string(P);
    for (int M : rec_.micro) {
      if (auto e = validate_pipeline_shape(P, M)) return e;
      if (rec_.mini % M != 0)
        return "--micro-batches: " + std::to_string(M) + " does not divide the mini-batch of " + std::to_string(rec_.mini) +
               " rows (--mini-batch); allowed: its divisors";
    }
    if (schedule_names_.empty()) schedule_names_ = schedule_names();
    // Weights and gradients, and at most a whole mini-batch's activations (GPipe) plus buffers.
    const std::uint64_t per_stage = layers_ / P, wts = 4ull * per_stage * hidden_ * ffn_ * 4;
    const std::uint64_t act = 4ull * rec_.mini * per_stage * (3ull * hidden_ + 3ull * ffn_) + 16ull * rec_.mini * hidden_;
    return ctx.check_fits(wts + act, "--mini-batch/--layers/--hidden/--ffn");
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/pipe", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (int M : rec_.micro) rec_.send_ms[M] = measure_send_ms(ctx, rec_.mini / M);
    for (const auto& n : schedule_names_)
      for (int M : rec_.micro)
        for (bool re : {false, true}) {
          const Case c{*parse_schedule(n), M, re};
          ctx.add(c.name(), 1, [this, &ctx, c](benchmark::State& st) { run(st, ctx, c); });
        }
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    fixture_.reset();
    if (ctx.rt.rank() == 0) write_bubble_csv(ctx, rec_, runs, cores_shared_by_ranks(ctx.rt, ctx.backend()));
    return 0;
  }

 private:
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
    const int P = ctx.world.size(), s = ctx.world.rank(), per = layers_ / P, M = c.micro_batches, rows = rec_.mini / M;
    f->alloc = std::make_unique<TrackingAllocator>(ctx.backend(), ctx.device.default_stream());
    MlpStageConfig cfg{hidden_, ffn_, per, s * per};
    cfg.recompute = c.recompute;
    f->compute = ctx.device.create_stream("compute");
    f->send = ctx.device.create_stream("send");
    f->stage = std::make_unique<MlpStage>(cfg, ctx.device, *f->alloc);
    f->stage->init(1, f->compute);
    f->engine = std::make_unique<PipelineEngine>(*f->stage, ctx.world, ctx.device, *f->alloc, f->compute, f->send);
    for (int j = 0; j < M; ++j) {  // micro-batch j of the same mini-batch, whatever M
      const std::size_t n = std::size_t(rows) * hidden_, first = std::size_t(j) * n;
      if (s == 0)
        f->inputs.push_back(device_from_f32(ctx.device, *f->alloc, normal_vector(n, 2, 100, 1.f, first), DType::f32,
                                            MemTag::buffers));
      if (s == P - 1) {
        f->outputs.push_back(f->alloc->allocate(n * 4, MemTag::buffers));
        f->grads.push_back(device_from_f32(ctx.device, *f->alloc, normal_vector(n, 2, 200, 1.f / float(rec_.mini), first),
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
    return f.engine->run(make_pipeline_schedule(c.kind, stages_, c.micro_batches), rec_.mini / c.micro_batches, in, out, dy);
  }

  void run(benchmark::State& st, BenchContext& ctx, const Case& c) {
    rec_.cases[c.name()] = c;
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
      rec_.samples[c.name()].push_back(mine);
      rec_.op_ms[c.name()].push_back(all_op_ms(ctx, c, rec));
      rec_.grads_off[c.name()].push_back(grads_against_one_micro_batch(ctx, c));
      st.SetIterationTime(rec.makespan_ms / 1e3);
    }
    ctx.profile_end();
  }

  // The stage's weight gradients after a step against GPipe's with one micro-batch (the same
  // weights and mini-batch; its first repetition's): the largest difference over the largest
  // reference gradient, the largest over the stages. The micro-batches' gradients summed are the
  // mini-batch's (002 Sec. 8.3) when it is at the level of fp32 rounding. -1 where the reference
  // case did not run first.
  double grads_against_one_micro_batch(BenchContext& ctx, const Case& c) {
    Fixture& f = *fixture_;
    f.compute.synchronize();
    const std::size_t n = f.stage->weights_per_kind();
    std::vector<float> g = host_f32(ctx.device, *f.alloc, f.stage->w1_grad().data(), n, DType::f32);
    const std::vector<float> g2 = host_f32(ctx.device, *f.alloc, f.stage->w2_grad().data(), n, DType::f32);
    g.insert(g.end(), g2.begin(), g2.end());
    const bool reference = c.kind == PipelineScheduleKind::gpipe && c.micro_batches == 1 && !c.recompute;
    if (reference && reference_grads_.empty()) reference_grads_ = g;
    double off = -1;
    if (reference_grads_.size() == g.size()) {
      double largest = 0, diff = 0;
      for (std::size_t i = 0; i < g.size(); ++i) {
        largest = std::max(largest, double(std::fabs(reference_grads_[i])));
        diff = std::max(diff, double(std::fabs(g[i] - reference_grads_[i])));
      }
      off = largest > 0 ? diff / largest : diff;
    }
    return ctx.rt.max(off);
  }

  std::vector<float> reference_grads_;  // this stage's, from GPipe with one micro-batch
  std::vector<std::string> schedule_names_;
  std::vector<int> micro_opt_;
  std::optional<int> mini_opt_, layers_opt_, hidden_opt_, ffn_opt_;
  int layers_ = 1, hidden_ = 1, ffn_ = 1, iters_warm_ = 1, stages_ = 1;
  PipeBubbleRecord rec_;
  std::unique_ptr<Fixture> fixture_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::PipeBubbleBench>(argc, argv); }
