// The GPT training step captured into a graph and replayed, over every rank mpirun gives (CTest:
// 1, 2 and 4), in each parallel layout: pipeline stages (1F1B over 4 micro-batches, sends on
// their own stream, which joins the capture through its events), data parallelism with ZeRO-1
// (reduce-scatter, shard step, all-gather), tensor parallelism, and PPMoE with segmented experts. Each rank's loss and
// parameters after a capture and its replays equal those after as many eager steps, to the bit.
// On MOEBENCH_TEST_BACKEND's backend (on cuda a CUDA graph with NCCL's operations in it).
#include <gtest/gtest.h>
#include "moe_test_util.h"
#include "gpt/gpt_trainer.h"
#include "test_backend.h"

namespace moebench {
namespace {

constexpr int kGraphSequences = 4, kMicroBatches = 4;
const ModelShape kShape{.layers = 4, .hidden = 8, .ffn = 16, .heads = 4, .seq = 6, .vocab = 13};

struct Stepped {
  double loss = 0;                          // the last stage's
  std::vector<std::vector<float>> weights;  // per parameter tensor of this rank
};

Stepped three_steps(Communicator& world, const ParallelLayout& layout, const GptConfig& model, bool captured) {
  Device dev = test_backend::open_device();
  GptTrainer trainer(world, dev, dev.backend(), layout, model, kGraphSequences, kMicroBatches);
  if (captured) {
    trainer.capture_step();  // one eager step, then the capture
    EXPECT_TRUE(trainer.step_captured());
    trainer.step();
    trainer.step();
  } else {
    for (int k = 0; k < 3; ++k) trainer.step();
  }
  dev.synchronize();
  Stepped out;
  if (layout.pp_index(world.rank()) == layout.pp - 1) out.loss = trainer.loss_sum();
  for (const TrainedParameter& p : trainer.parameters())
    out.weights.push_back(test_backend::host_floats(dev, *p.weight, p.dtype));
  return out;
}

void expect_replays_equal_eager_steps(const ParallelLayout& layout, const ModelShape& shape = kShape,
                                      ExpertGemm experts = ExpertGemm::grouped) {
  auto world = test_backend::world();
  ASSERT_FALSE(validate_layout(layout, shape, world->size())) << *validate_layout(layout, shape, world->size());
  GptConfig model = layout_model(shape, layout);
  model.moe.expert_gemm = experts;
  const Stepped eager = three_steps(*world, layout, model, false), captured = three_steps(*world, layout, model, true);
  EXPECT_EQ(captured.loss, eager.loss) << layout.describe();
  ASSERT_EQ(captured.weights.size(), eager.weights.size());
  for (std::size_t i = 0; i < eager.weights.size(); ++i)
    EXPECT_EQ(captured.weights[i], eager.weights[i]) << layout.describe() << ": parameter " << i;
}

TEST(StepGraph, PipelineStagesReplayTheirEagerSteps) {
  const int P = test_backend::world()->size();
  expect_replays_equal_eager_steps(ParallelLayout::of(LayoutKind::dense, 1, 1, P));
}

TEST(StepGraph, DataParallelZeroOneReplaysItsEagerSteps) {
  const int D = test_backend::world()->size();
  expect_replays_equal_eager_steps(ParallelLayout::of(LayoutKind::dense, D, 1, 1, /*zero=*/true));
}

TEST(StepGraph, TensorParallelReplaysItsEagerSteps) {
  const int T = test_backend::world()->size();
  expect_replays_equal_eager_steps(ParallelLayout::of(LayoutKind::dense, 1, T, 1));
}

// PPMoE over the TP group with segmented experts: each rank's experts, the outputs' all-reduce and
// the gradients' sums all in the graph, no count read on the host.
TEST(StepGraph, PpmoeWithSegmentedExpertsReplaysItsEagerSteps) {
  const int T = test_backend::world()->size();
  ModelShape shape = kShape;
  shape.experts = 4;
  shape.moe_every = 2;
  expect_replays_equal_eager_steps(ParallelLayout::of(LayoutKind::ppmoe, 1, T, 1), shape, ExpertGemm::segmented);
}

}  // namespace
}  // namespace moebench
