// A model of 4 residual MLP blocks split into as many pipeline stages as mpirun gives ranks
// (CTest: 1, 2 and 4), run by the engine with GPipe, 1F1B and ZB-H1 for M in {1, 2, 4, 8}
// micro-batches, with and without recomputation: the last stage's outputs and every stage's
// weight gradients equal those of the whole model on one rank, micro-batch after micro-batch.
// Recomputation lowers GPipe's peak activation memory and changes nothing else. Run in the pool's
// poison mode (CTest): a buffer reused while a send or a later op still reads it shows as NaN.
#include <gtest/gtest.h>
#include "mlp_pipeline_model.h"
#include "moe_test_util.h"
#include "pipeline/mlp_stage.h"
#include "pipeline/pipeline_engine.h"
#include "test_backend.h"

namespace moebench {
using namespace testing_util;

namespace {

using namespace mlp_pipeline_model;
constexpr std::uint64_t kSeed = 11;

struct Grads {
  std::vector<float> out;     // the last stage's outputs, micro-batch after micro-batch
  std::vector<float> w1, w2;  // this stage's blocks
  std::size_t peak_activations = 0;
};

class PipelineEngineTest : public StagePerRank {
 protected:
  std::vector<float> input(int j) const { return tokens(kRows, kHidden, 300 + j); }
  // dL/dy of micro-batch j: a fixed direction, over the mini-batch's size.
  std::vector<float> output_grad(int j, int M) const {
    auto g = tokens(kRows, kHidden, 400 + j);
    for (float& v : g) v /= float(M * kRows);
    return g;
  }

  // The whole model on this rank, micro-batch after micro-batch; this stage's slice of it.
  Grads reference(int M) {
    TrackingAllocator alloc(Backend::cpu);
    MlpStage whole({kHidden, kFfn, kLayers, 0}, dev, alloc);
    const Stream& s = dev.default_stream();
    whole.init(kSeed, s);
    Grads g;
    for (int j = 0; j < M; ++j) {
      const auto x = input(j), dy = output_grad(j, M);
      std::vector<float> y(x.size()), dx(x.size());
      whole.forward(j, x.data(), y.data(), kRows, s);
      whole.backward(j, dy.data(), dx.data(), s);
      s.synchronize();
      g.out.insert(g.out.end(), y.begin(), y.end());
    }
    const std::size_t per = std::size_t(kHidden) * kFfn, first = per * (stage * kLayers / P), n = per * (kLayers / P);
    const float* w1 = whole.w1_grad().as<float>() + first;
    const float* w2 = whole.w2_grad().as<float>() + first;
    g.w1.assign(w1, w1 + n);
    g.w2.assign(w2, w2 + n);
    return g;
  }

  Grads pipelined(PipelineScheduleKind kind, int M, bool recompute, PipelineStepRecord* record = nullptr) {
    TrackingAllocator alloc(Backend::cpu);
    MlpStageConfig cfg{kHidden, kFfn, kLayers / P, stage * kLayers / P};
    cfg.recompute = recompute;
    MlpStage mine(cfg, dev, alloc);
    Stream compute = dev.create_stream("compute"), send = dev.create_stream("send");
    mine.init(kSeed, compute);
    std::vector<std::vector<float>> xs, ys, dys;
    std::vector<const void*> in, dy;
    std::vector<void*> out;
    for (int j = 0; j < M; ++j) {
      xs.push_back(input(j));
      dys.push_back(output_grad(j, M));
      ys.emplace_back(std::size_t(kRows) * kHidden, NAN);
    }
    if (stage == 0)
      for (auto& x : xs) in.push_back(x.data());
    if (stage == P - 1)
      for (int j = 0; j < M; ++j) {
        out.push_back(ys[j].data());
        dy.push_back(dys[j].data());
      }
    alloc.reset_peaks();
    PipelineEngine engine(mine, *world, dev, alloc, compute, send);
    const auto rec = engine.run(make_pipeline_schedule(kind, P, M), kRows, in, out, dy);
    if (record) *record = rec;
    EXPECT_EQ(mine.micro_batches_held(), 0) << "every micro-batch's weight gradient ran";
    Grads g;
    for (auto& y : ys) g.out.insert(g.out.end(), y.begin(), y.end());
    const float* w1 = mine.w1_grad().as<float>();
    const float* w2 = mine.w2_grad().as<float>();
    g.w1.assign(w1, w1 + mine.weights_per_kind());
    g.w2.assign(w2, w2 + mine.weights_per_kind());
    g.peak_activations = alloc.peak(MemTag::activations);
    return g;
  }

  Device dev = Device::open(Backend::cpu);
};

TEST_F(PipelineEngineTest, EverySchedulePlainAndRecomputedEqualsTheWholeModel) {
  ASSERT_EQ(kLayers % P, 0) << "run at 1, 2 or 4 ranks";
  for (int M : {1, 2, 4, 8}) {
    const Grads want = reference(M);
    for (auto kind : {PipelineScheduleKind::gpipe, PipelineScheduleKind::one_f_one_b, PipelineScheduleKind::zb_h1}) {
      const std::string what = schedule_name(kind) + " P=" + std::to_string(P) + " M=" + std::to_string(M);
      const Grads plain = pipelined(kind, M, false), again = pipelined(kind, M, true);
      if (stage == P - 1) {
        EXPECT_LT(rel_diff(plain.out.data(), want.out.data(), want.out.size()), 1e-6) << what << ": outputs";
        EXPECT_EQ(again.out, plain.out) << what << ": recomputation changed the outputs";
      }
      EXPECT_LT(rel_diff(plain.w1.data(), want.w1.data(), want.w1.size()), 1e-5) << what << ": w1 gradient";
      EXPECT_LT(rel_diff(plain.w2.data(), want.w2.data(), want.w2.size()), 1e-5) << what << ": w2 gradient";
      EXPECT_EQ(again.w1, plain.w1) << what << ": recomputation changed the w1 gradient";
      EXPECT_EQ(again.w2, plain.w2) << what << ": recomputation changed the w2 gradient";
      if (kind == PipelineScheduleKind::gpipe && M > 1) {  // every micro-batch held at once
        EXPECT_LT(again.peak_activations, plain.peak_activations) << what << ": recomputation kept as much";
      }
    }
  }
}

TEST_F(PipelineEngineTest, TheRecordTimesEveryOpOfTheTable) {
  PipelineStepRecord rec;
  pipelined(PipelineScheduleKind::zb_h1, 4, false, &rec);
  const auto table = make_pipeline_schedule(PipelineScheduleKind::zb_h1, P, 4);
  ASSERT_EQ(rec.ops.size(), table.steps[stage].size());
  double last_end = 0, busy = 0;
  for (std::size_t i = 0; i < rec.ops.size(); ++i) {
    EXPECT_EQ(rec.ops[i].step, table.steps[stage][i]);
    EXPECT_GE(rec.ops[i].start, last_end - 1e-9) << "ops overlap on one stream";
    EXPECT_GT(rec.ops[i].end, rec.ops[i].start);
    last_end = rec.ops[i].end;
    busy += rec.ops[i].end - rec.ops[i].start;
  }
  EXPECT_NEAR(rec.busy_ms, busy, 1e-9);
  EXPECT_GE(rec.makespan_ms, last_end - 1e-3);
  EXPECT_GE(rec.bubble_fraction(), 0);
  EXPECT_LT(rec.bubble_fraction(), 1);
  const StageOpTimes t = rec.mean_op_ms();
  EXPECT_GT(t.f, 0);
  EXPECT_GT(t.b, 0);
  EXPECT_GT(t.w, 0);
}

}  // namespace
}  // namespace moebench
