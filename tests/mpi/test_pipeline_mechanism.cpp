// How the pipeline engine runs each schedule, read from the runtime's own records at whatever
// world size mpirun gives (CTest: 1, 2 and 4 ranks), so a schedule that turns into its
// neighbour -- ZB-H1 into 1F1B, 1F1B into GPipe, recomputation into keeping everything -- fails
// here even though its outputs stay right:
//  - the stage is asked for exactly the table's ops in the table's order (a call log);
//  - weight-gradient GEMMs (those writing the stage's dW buffers, from the timeline) run inside
//    W where the schedule splits the backward, and none inside B; inside B otherwise;
//  - ZB-H1's W of micro-batch j runs after B of micro-batch j + s on stage s;
//  - the pool's activation peak: 1F1B holds at most P - s micro-batches, GPipe all M;
//  - recomputation reruns the forward's GEMMs inside each backward (a pipe.recompute range).
#include <gtest/gtest.h>
#include <map>
#include "mlp_pipeline_model.h"
#include "moe_test_util.h"
#include "pipeline/mlp_stage.h"
#include "pipeline/pipeline_engine.h"
#include "timeline_util.h"
#include "test_backend.h"

namespace moebench {
using namespace testing_util;

namespace {

using namespace mlp_pipeline_model;

// What the engine asked the stage to do, in the order it asked (the compute stream's order):
// "F3", "B3" (input gradient), "W3" (weight gradient), "BW3" (the whole backward).
class CallLog final : public PipelineStage {
 public:
  explicit CallLog(MlpStage& inner) : inner_(inner) {}
  int width() const override { return inner_.width(); }
  void forward(int j, const void* x, void* y, int rows, const Stream& s) override {
    calls.push_back("F" + std::to_string(j));
    inner_.forward(j, x, y, rows, s);
  }
  void backward_input(int j, const void* dy, void* dx, const Stream& s) override {
    calls.push_back("B" + std::to_string(j));
    inner_.backward_input(j, dy, dx, s);
  }
  void backward_weight(int j, const Stream& s) override {
    calls.push_back("W" + std::to_string(j));
    inner_.backward_weight(j, s);
  }
  void backward(int j, const void* dy, void* dx, const Stream& s) override {
    calls.push_back("BW" + std::to_string(j));
    inner_.backward(j, dy, dx, s);
  }
  std::vector<std::string> calls;

 private:
  MlpStage& inner_;
};

// The calls a table asks for.
std::vector<std::string> expected_calls(const PipelineSchedule& table, int stage) {
  std::vector<std::string> out;
  for (const PipeStep& step : table.steps[stage]) {
    const std::string j = std::to_string(step.micro);
    if (step.op == PipeOp::F) out.push_back("F" + j);
    if (step.op == PipeOp::B) out.push_back((table.splits_backward() ? "B" : "BW") + j);
    if (step.op == PipeOp::W) out.push_back("W" + j);
  }
  return out;
}

// One pipelined step, recorded.
struct Recorded {
  std::vector<std::string> calls;
  std::vector<TimelineEntry> timeline;
  int compute_track = 0;
  std::size_t peak_activations = 0;
  std::uintptr_t dw1 = 0, dw2 = 0, w1 = 0, w2 = 0;  // the stage's buffers
  std::size_t weight_bytes = 0;
};

class PipelineMechanism : public StagePerRank {
 protected:
  MlpStageConfig config(bool recompute) const {
    MlpStageConfig cfg{kHidden, kFfn, kLayers / P, stage * kLayers / P};
    cfg.recompute = recompute;
    return cfg;
  }

  Recorded run(PipelineScheduleKind kind, int M, bool recompute) {
    TrackingAllocator alloc(Backend::cpu);
    MlpStage mlp(config(recompute), dev, alloc);
    CallLog logged(mlp);
    Stream compute = dev.create_stream("compute"), send = dev.create_stream("send");
    mlp.init(5, compute);
    std::vector<std::vector<float>> xs, ys, dys;
    std::vector<const void*> in, dy;
    std::vector<void*> out;
    for (int j = 0; j < M; ++j) {
      xs.push_back(tokens(kRows, kHidden, 30 + j));
      dys.push_back(tokens(kRows, kHidden, 60 + j));
      ys.emplace_back(std::size_t(kRows) * kHidden);
    }
    if (stage == 0)
      for (auto& x : xs) in.push_back(x.data());
    if (stage == P - 1)
      for (int j = 0; j < M; ++j) {
        out.push_back(ys[j].data());
        dy.push_back(dys[j].data());
      }
    alloc.reset_peaks();
    Recorded r;
    {
      RecordedTimeline recording(stage);
      PipelineEngine engine(logged, *world, dev, alloc, compute, send);
      engine.run(make_pipeline_schedule(kind, P, M), kRows, in, out, dy);
      r.timeline = recording.entries();
    }
    r.calls = logged.calls;
    r.compute_track = compute.id;
    r.peak_activations = alloc.peak(MemTag::activations);
    r.dw1 = reinterpret_cast<std::uintptr_t>(mlp.w1_grad().data());
    r.dw2 = reinterpret_cast<std::uintptr_t>(mlp.w2_grad().data());
    r.w1 = reinterpret_cast<std::uintptr_t>(mlp.w1().data());
    r.w2 = reinterpret_cast<std::uintptr_t>(mlp.w2().data());
    r.weight_bytes = mlp.w1().bytes();
    return r;
  }

  // One micro-batch's forward activations on this stage, from the pool.
  std::size_t activations_of_one_forward() {
    TrackingAllocator alloc(Backend::cpu);
    MlpStage mlp(config(false), dev, alloc);
    const Stream& s = dev.default_stream();
    mlp.init(5, s);
    const auto x = tokens(kRows, kHidden, 1);
    std::vector<float> y(x.size());
    mlp.forward(0, x.data(), y.data(), kRows, s);
    return alloc.current(MemTag::activations);
  }

  Device dev = Device::open(Backend::cpu);
};

// What a GEMM of the step did: wrote a weight gradient, or ran the forward (x W, W untransposed).
bool writes_weight_grad(const Recorded& r, const TimelineEntry& g) {
  const std::uintptr_t c = pointer_arg(g, "c");
  return (c >= r.dw1 && c < r.dw1 + r.weight_bytes) || (c >= r.dw2 && c < r.dw2 + r.weight_bytes);
}
bool is_forward_gemm(const Recorded& r, const TimelineEntry& g) {
  const std::uintptr_t b = pointer_arg(g, "b");
  const bool weight = (b >= r.w1 && b < r.w1 + r.weight_bytes) || (b >= r.w2 && b < r.w2 + r.weight_bytes);
  return weight && number_arg(g, "trans_b") == 0;
}

// The engine's op ranges on the compute stream, each with its table step.
std::vector<std::pair<PipeStep, TimelineEntry>> op_ranges(const Recorded& r, const PipelineSchedule& table, int stage) {
  std::vector<TimelineEntry> all;
  for (const char* name : {"pipe.fwd", "pipe.bwd", "pipe.wgrad"})
    for (const TimelineEntry& e : ranges_named(r.timeline, name, r.compute_track)) all.push_back(e);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
  std::vector<std::pair<PipeStep, TimelineEntry>> out;
  const auto& steps = table.steps[stage];
  EXPECT_EQ(all.size(), steps.size()) << "one range per op of the table";
  for (std::size_t i = 0; i < std::min(all.size(), steps.size()); ++i) {
    const char* want = steps[i].op == PipeOp::F ? "pipe.fwd" : steps[i].op == PipeOp::B ? "pipe.bwd" : "pipe.wgrad";
    EXPECT_EQ(all[i].name, want) << "op " << i << " of the table";
    out.emplace_back(steps[i], all[i]);
  }
  return out;
}

}  // namespace

TEST_F(PipelineMechanism, EachScheduleRunsItsTableOpForOp) {
  for (auto kind : {PipelineScheduleKind::gpipe, PipelineScheduleKind::one_f_one_b, PipelineScheduleKind::zb_h1})
    for (int M : {1, 4, 8}) {
      const PipelineSchedule table = make_pipeline_schedule(kind, P, M);
      const Recorded r = run(kind, M, false);
      EXPECT_EQ(r.calls, expected_calls(table, stage))
          << schedule_name(kind) << " M=" << M << " stage " << stage << ": the stage was asked for other ops than the table's";
      op_ranges(r, table, stage);
    }
}

// ZB-H1 splits the backward: B holds no weight-gradient GEMM, each W holds the stage's (two per
// block), and W of micro-batch j waits for B of micro-batch j + s. 1F1B and GPipe run them in B.
TEST_F(PipelineMechanism, WeightGradientsRunInWOnlyWhereTheScheduleSplitsTheBackward) {
  const int M = 8, per_op = 2 * (kLayers / P);
  for (auto kind : {PipelineScheduleKind::gpipe, PipelineScheduleKind::one_f_one_b, PipelineScheduleKind::zb_h1}) {
    const std::string what = schedule_name(kind) + " stage " + std::to_string(stage);
    const PipelineSchedule table = make_pipeline_schedule(kind, P, M);
    const Recorded r = run(kind, M, false);
    std::map<int, TimelineEntry> b_of, w_of;
    int in_ops = 0;
    for (const auto& [step, range] : op_ranges(r, table, stage)) {
      int wgrads = 0;
      for (const TimelineEntry& g : ops_inside(r.timeline, range, "gemm")) wgrads += writes_weight_grad(r, g);
      in_ops += wgrads;
      if (step.op == PipeOp::F) {
        EXPECT_EQ(wgrads, 0) << what << ": a forward wrote weight gradients";
      }
      if (step.op == PipeOp::B) {
        b_of[step.micro] = range;
        if (table.splits_backward())
          EXPECT_EQ(wgrads, 0) << what << ": B of micro-batch " << step.micro
                               << " ran weight-gradient GEMMs: ZB-H1 degenerated into 1F1B (B ran the whole backward)";
        else
          EXPECT_EQ(wgrads, per_op) << what << ": B of micro-batch " << step.micro << " is not the whole backward";
      }
      if (step.op == PipeOp::W) {
        w_of[step.micro] = range;
        EXPECT_EQ(wgrads, per_op) << what << ": W of micro-batch " << step.micro
                                  << " did not run the weight-gradient GEMMs (they ran elsewhere: ZB-H1 lost its W)";
      }
    }
    int all = 0;
    for (const TimelineEntry& e : r.timeline)
      if (!e.range && e.name == "gemm" && writes_weight_grad(r, e)) ++all;
    EXPECT_EQ(all, M * per_op) << what << ": weight-gradient GEMMs in all";
    EXPECT_EQ(in_ops, all) << what << ": weight-gradient GEMMs outside the engine's ops";
    if (!table.splits_backward()) continue;
    for (int j = 0; j + stage < M; ++j)
      EXPECT_GE(w_of[j].start_us, b_of[j + stage].end_us)
          << what << ": W of micro-batch " << j << " ran before B of micro-batch " << j + stage << " (not deferred)";
  }
}

// Measured by the pool: GPipe holds every micro-batch's activations at once, 1F1B at most
// P - s on stage s (one micro-batch's forward activations A; the rest of a backward's own peak).
TEST_F(PipelineMechanism, OneFOneBHoldsAtMostPMicroBatchesAndGPipeAllOfThem) {
  const std::size_t A = activations_of_one_forward();
  const std::size_t one = run(PipelineScheduleKind::gpipe, 1, false).peak_activations;  // one forward + backward
  ASSERT_GE(one, A);
  const int M = 8, held = std::min(P - stage, M);
  const std::size_t gpipe = run(PipelineScheduleKind::gpipe, M, false).peak_activations;
  const std::size_t ofob = run(PipelineScheduleKind::one_f_one_b, M, false).peak_activations;
  EXPECT_GE(gpipe, std::size_t(M) * A) << "stage " << stage << ": GPipe did not hold all " << M << " micro-batches";
  EXPECT_LE(ofob, std::size_t(held - 1) * A + one)
      << "stage " << stage << ": 1F1B held more than P - s = " << held << " micro-batches' activations ("
      << double(ofob - one) / double(A) + 1 << "): it degenerated towards GPipe";
  EXPECT_GE(ofob, std::size_t(held) * A) << "stage " << stage << ": 1F1B held fewer micro-batches than its warm-up";
}

// Recomputation keeps the stage input alone and reruns the forward's GEMMs inside each backward
// (x W1 per block, and the next block's input, in a pipe.recompute range); without it no backward
// runs a forward GEMM. It lowers the peak.
TEST_F(PipelineMechanism, RecomputationRerunsTheForwardInsideEachBackward) {
  const int M = 4, L = kLayers / P;
  for (bool recompute : {false, true}) {
    const std::string what = std::string(recompute ? "with" : "without") + " recomputation, stage " + std::to_string(stage);
    const PipelineSchedule table = make_pipeline_schedule(PipelineScheduleKind::gpipe, P, M);
    const Recorded r = run(PipelineScheduleKind::gpipe, M, recompute);
    for (const auto& [step, range] : op_ranges(r, table, stage)) {
      if (step.op != PipeOp::B) continue;
      int forward = 0;
      for (const TimelineEntry& g : ops_inside(r.timeline, range, "gemm")) forward += is_forward_gemm(r, g);
      EXPECT_EQ(forward, recompute ? 2 * L - 1 : 0)
          << what << ": forward GEMMs inside B of micro-batch " << step.micro
          << (recompute ? " (recomputation did not rerun the forward)" : " (a backward reran the forward unasked)");
      int reruns = 0;
      for (const TimelineEntry& e : ranges_named(r.timeline, "pipe.recompute", r.compute_track))
        reruns += e.start_us >= range.start_us && e.end_us <= range.end_us;
      EXPECT_EQ(reruns, recompute ? 1 : 0) << what << ": pipe.recompute ranges inside B of micro-batch " << step.micro;
    }
  }
  EXPECT_LT(run(PipelineScheduleKind::gpipe, M, true).peak_activations, run(PipelineScheduleKind::gpipe, M, false).peak_activations)
      << "stage " << stage << ": recomputation did not lower GPipe's peak (it kept the activations)";
}

}  // namespace moebench
