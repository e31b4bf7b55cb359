// The decoder-only model split into as many pipeline stages as mpirun gives ranks (CTest: 1, 2
// and 4), run by the engine with GPipe, 1F1B and ZB-H1 for M in {1, 2, 4, 8} micro-batches of
// an 8-sequence mini-batch, with and without recomputation: the loss equals the whole model's
// on one rank, and so does every parameter's gradient on the stage that holds it (the token
// embedding's after the first and last stages have added theirs up); recomputation lowers
// GPipe's peak activations; a model whose layers the stages do not split is refused. ZB-H1's B
// runs no weight-gradient GEMM (the timeline's GEMMs by the buffer they write). On
// MOEBENCH_TEST_BACKEND's backend (on cuda over NCCL), but for the timeline's case.
#include <gtest/gtest.h>
#include "kernels/convert.h"
#include "moe_test_util.h"
#include "gpt/gpt_model.h"
#include "pipeline/pipeline_engine.h"
#include "test_backend.h"
#include "timeline_util.h"

namespace moebench {
using namespace testing_util;

namespace {

const GptConfig kModel = gpt_config({.layers = 4, .hidden = 8, .ffn = 16, .heads = 2, .seq = 6, .vocab = 13});
constexpr int kPipelineSequences = 8;

// Where, in the whole model's parameter list of `total` tensors, the ones stage `stage` of P holds
// are, in GptStage::parameters()'s order: the embeddings (first), 8 per block, the final
// LayerNorm and, on a last stage that is not also the first, the token embedding again.
std::vector<std::size_t> held_by_stage(std::size_t total, int P, int stage) {
  const int per = kModel.layers / P, first = stage * per;
  std::vector<std::size_t> at;
  if (stage == 0) at = {0, 1};
  for (int i = 0; i < 8 * per; ++i) at.push_back(2 + 8 * std::size_t(first) + i);
  if (stage == P - 1) {
    at.push_back(total - 2);
    at.push_back(total - 1);
    if (stage != 0) at.push_back(0);
  }
  return at;
}

// The mini-batch's tokens and targets (on the device) as M micro-batches of `rows` rows for `stage`.
void give_micro_batches(GptStage& stage, const std::int32_t* tokens, const std::int32_t* targets, int M, int rows,
                        float loss_scale) {
  std::vector<const std::int32_t*> tok, tgt;
  for (int j = 0; j < M; ++j) {
    tok.push_back(tokens + j * rows);
    tgt.push_back(targets + j * rows);
  }
  stage.set_batch(tok, tgt, rows / kModel.seq, loss_scale);
}

TEST(GptPipeline, EveryScheduleGivesTheWholeModelsLossAndGradients) {
  auto world = test_backend::world();
  const int P = world->size(), stage = world->rank(), T = kPipelineSequences * kModel.seq;
  ASSERT_FALSE(GptStage::validate(kModel, P, 1)) << "run at 1, 2 or 4 ranks";
  Device dev = test_backend::open_device();
  test_backend::DeviceMirror d(dev, dev.default_stream());
  auto tokens = token_ids(T, kModel.vocab, 1), targets = token_ids(T, kModel.vocab, 2);
  const double tol = test_backend::f32_tolerance(1e-5);

  TrackingAllocator ref_alloc(dev.backend(), dev.default_stream());
  GptModel whole(kModel, dev, ref_alloc);
  whole.init(17, dev.default_stream());
  const double want_loss = whole.forward_backward(d(tokens), d(targets), kPipelineSequences, 1.f / T, dev.default_stream());
  auto ref = whole.parameters();
  std::vector<std::vector<float>> want;  // the reference gradients this stage holds
  for (std::size_t i : held_by_stage(ref.size(), P, stage)) want.push_back(test_backend::host_floats(dev, *ref[i].second));

  std::size_t plain_peak = 0;
  for (auto kind : {PipelineScheduleKind::gpipe, PipelineScheduleKind::one_f_one_b, PipelineScheduleKind::zb_h1})
    for (int M : {1, 2, 4, 8})
      for (bool recompute : {false, true}) {
      const std::string what = schedule_name(kind) + " P=" + std::to_string(P) + " M=" + std::to_string(M) +
                               (recompute ? " recomputed" : "");
      TrackingAllocator alloc(dev.backend(), dev.default_stream());
      GptStage mine(kModel, stage, P, dev, alloc);
      mine.set_recompute(recompute);
      Stream compute = dev.create_stream("compute"), send = dev.create_stream("send");
      mine.init(17, compute);
      const int rows = kPipelineSequences / M * kModel.seq;
      give_micro_batches(mine, d(tokens), d(targets), M, rows, 1.f / T);
      alloc.reset_peaks();
      PipelineEngine engine(mine, *world, dev, alloc, compute, send);
      engine.run(make_pipeline_schedule(kind, P, M), rows, {}, {}, {});
      mine.sync_tied_embedding(*world, compute);
      compute.synchronize();
      if (stage == P - 1) {
        EXPECT_NEAR(mine.loss_sum(compute), want_loss, 1e-4 * want_loss) << what;
      }
      auto got = mine.parameters();
      ASSERT_EQ(got.size(), want.size()) << what;
      for (std::size_t i = 0; i < got.size(); ++i) {
        const std::vector<float> g = test_backend::host_floats(dev, *got[i].second);
        ASSERT_EQ(g.size(), want[i].size()) << what << ": parameter " << i;
        EXPECT_LT(rel_diff(g.data(), want[i].data(), g.size()), tol) << what << ": gradient of parameter " << i;
      }
      // GPipe holds every micro-batch at once: recomputation keeps a stage's inputs only.
      const std::size_t peak = alloc.peak(MemTag::activations);
      if (kind == PipelineScheduleKind::gpipe && M > 1) {
        if (!recompute) plain_peak = peak;
        else EXPECT_LT(peak, plain_peak) << what << ": recomputation kept as much";
      }
    }
}

// bf16 activations between the stages (sent as their 16-bit words), 1F1B and ZB-H1 over 2
// micro-batches: the loss and every gradient of the whole bf16 model on one rank, up to the
// rounding of sums taken in another order (the micro-batches', the tied embedding's).
TEST(GptPipeline, SixteenBitStagesGiveTheWholeSixteenBitModel) {
  auto world = test_backend::world();
  const int P = world->size(), stage = world->rank(), T = kPipelineSequences * kModel.seq;
  GptConfig model = kModel;
  model.dtype = DType::bf16;
  Device dev = test_backend::open_device();
  test_backend::DeviceMirror d(dev, dev.default_stream());
  auto tokens = token_ids(T, model.vocab, 1), targets = token_ids(T, model.vocab, 2);
  TrackingAllocator ref_alloc(dev.backend(), dev.default_stream());
  GptModel whole(model, dev, ref_alloc);
  whole.init(17, dev.default_stream());
  const double want_loss = whole.forward_backward(d(tokens), d(targets), kPipelineSequences, 1.f / T, dev.default_stream());
  auto ref = whole.trained_parameters();
  std::vector<std::vector<float>> want;  // the reference gradients this stage holds, widened
  for (std::size_t i : held_by_stage(ref.size(), P, stage))
    want.push_back(test_backend::host_floats(dev, *ref[i].grad, ref[i].dtype));
  for (auto kind : {PipelineScheduleKind::one_f_one_b, PipelineScheduleKind::zb_h1}) {
    const std::string what = schedule_name(kind) + " P=" + std::to_string(P);
    TrackingAllocator alloc(dev.backend(), dev.default_stream());
    GptStage mine(model, stage, P, dev, alloc);
    Stream compute = dev.create_stream("compute"), send = dev.create_stream("send");
    mine.init(17, compute);
    const int M = 2, seqs = kPipelineSequences / M, rows = seqs * kModel.seq;
    give_micro_batches(mine, d(tokens), d(targets), M, rows, 1.f / T);
    PipelineEngine engine(mine, *world, dev, alloc, compute, send);
    engine.run(make_pipeline_schedule(kind, P, M), rows, {}, {}, {});
    mine.sync_tied_embedding(*world, compute);
    compute.synchronize();
    if (stage == P - 1) {
      EXPECT_NEAR(mine.loss_sum(compute), want_loss, 1e-3 * want_loss) << what;
    }
    auto got = mine.trained_parameters();
    ASSERT_EQ(got.size(), want.size()) << what;
    // The two differ only in how weight gradients are summed: the whole model stores each sum
    // once, the stages once per micro-batch and once more for the tied embedding's sum; both
    // sides' stores count (sixteen_bit_tolerance), the sums run over the tokens.
    const double tol = sixteen_bit_tolerance(model.dtype, 1 + (M + 1), T);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const auto g = test_backend::host_floats(dev, *got[i].grad, got[i].dtype);
      EXPECT_LT(rel_l2(g.data(), want[i].data(), g.size()), tol) << what << ": gradient of parameter " << i;
    }
  }
}

// The model's B and W under ZB-H1 and 1F1B: every GEMM that writes a parameter's gradient -- the
// attention's two and the MLP's two per block, the tied output layer's on the last stage -- runs
// inside W where the schedule splits the backward, inside B where it does not.
TEST(GptPipeline, ZeroBubbleLeavesEveryWeightGradientGemmToW) {
  if (test_backend::backend() != Backend::cpu) GTEST_SKIP() << test_backend::kReadsCpuTimeline;
  auto world = make_mpi_communicator();
  const int P = world->size(), stage = world->rank(), M = 4, rows = kPipelineSequences / M * kModel.seq;
  const auto tokens = token_ids(kPipelineSequences * kModel.seq, kModel.vocab, 1), targets = token_ids(kPipelineSequences * kModel.seq, kModel.vocab, 2);
  Device dev = Device::open(Backend::cpu);
  const int per_micro = 4 * (kModel.layers / P) + (stage == P - 1 ? 1 : 0);
  for (auto kind : {PipelineScheduleKind::one_f_one_b, PipelineScheduleKind::zb_h1}) {
    const std::string what = schedule_name(kind) + " stage " + std::to_string(stage);
    TrackingAllocator alloc(Backend::cpu);
    GptStage mine(kModel, stage, P, dev, alloc);
    Stream compute = dev.create_stream("compute"), send = dev.create_stream("send");
    mine.init(17, compute);
    give_micro_batches(mine, tokens.data(), targets.data(), M, rows, 1.f / float(kPipelineSequences * kModel.seq));
    std::vector<TimelineEntry> timeline;
    {
      RecordedTimeline recording(stage);
      PipelineEngine engine(mine, *world, dev, alloc, compute, send);
      engine.run(make_pipeline_schedule(kind, P, M), rows, {}, {}, {});
      timeline = recording.entries();
    }
    const auto params = mine.trained_parameters();
    auto writes_a_gradient = [&](const TimelineEntry& g) {
      for (const TrainedParameter& p : params)
        if (points_into(pointer_arg(g, "c"), p.grad->data(), p.grad->bytes())) return true;
      return false;
    };
    auto count_in = [&](const char* range) {
      std::vector<int> out;
      for (const TimelineEntry& r : ranges_named(timeline, range, compute.id)) {
        int n = 0;
        for (const TimelineEntry& g : ops_inside(timeline, r, "gemm")) n += writes_a_gradient(g);
        out.push_back(n);
      }
      return out;
    };
    const bool split = kind == PipelineScheduleKind::zb_h1;
    EXPECT_EQ(count_in("pipe.bwd"), std::vector<int>(M, split ? 0 : per_micro))
        << what << ": weight-gradient GEMMs in each B" << (split ? " (ZB-H1 degenerated into 1F1B)" : "");
    EXPECT_EQ(count_in("pipe.wgrad"), std::vector<int>(split ? M : 0, per_micro)) << what << ": weight-gradient GEMMs in each W";
  }
}

TEST(GptPipeline, LayersTheStagesDoNotSplitAreRefused) {
  EXPECT_EQ(GptStage::validate(kModel, 3, 1).value(),
            "--pp: 3 pipeline stages do not split the 4 layers evenly; allowed: a divisor of --layers");
  EXPECT_EQ(GptStage::validate(kModel, 2, 4).value(), "--tp: 4 does not divide the 2 heads");
}

}  // namespace
}  // namespace moebench
