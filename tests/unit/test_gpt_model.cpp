// The decoder-only model on the CPU: the gradient of its loss against central finite
// differences for entries of every parameter tensor (embeddings, LayerNorms, attention, MLP),
// micro-batches with accumulated gradients equal to the whole mini-batch, and the embedding
// kernels (forward and the accumulating backward).
#include <gtest/gtest.h>
#include <chrono>
#include <cmath>
#include <future>
#include <map>
#include <string>
#include <random>
#include <set>
#include "kernels/embedding.h"
#include "models/roofline.h"
#include "moe_test_util.h"
#include "gpt/gpt_model.h"
#include "gpt/gpt_trainer.h"
#include "comm/comm.h"
#include "timeline_util.h"

namespace moebench {
using testing_util::token_ids;
namespace {

const GptConfig kTiny = [] {
  GptConfig c = gpt_config({.layers = 2, .hidden = 8, .ffn = 16, .heads = 2, .seq = 5, .vocab = 11});
  c.token_std = 0.5f;  // probes of 1e-2 small against the embeddings
  c.position_std = 0.1f;
  return c;
}();

class GptModelTest : public ::testing::Test {
 protected:
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc{Backend::cpu};
  const Stream& s = dev.default_stream();
};

TEST_F(GptModelTest, GradientsMatchFiniteDifferencesInEveryParameter) {
  GptModel model(kTiny, dev, alloc);
  model.init(3, s);
  const int sequences = 2, T = sequences * kTiny.seq;
  const auto tokens = token_ids(T, kTiny.vocab, 1), targets = token_ids(T, kTiny.vocab, 2);
  const float scale = 1.f / T;
  const double loss = model.forward_backward(tokens.data(), targets.data(), sequences, scale, s) * scale;
  EXPECT_GT(loss, 0.5 * std::log(double(kTiny.vocab)));  // near log V for a fresh model
  EXPECT_LT(loss, 2.0 * std::log(double(kTiny.vocab)));
  auto params = model.parameters();
  ASSERT_EQ(params.size(), 2u + 8u * kTiny.layers + 2u);
  // Analytic gradients, copied before the probes add to them.
  std::vector<std::vector<float>> grads;
  for (auto& [w, g] : params) grads.emplace_back(g->as<float>(), g->as<float>() + g->bytes() / 4);
  std::mt19937 pick(7);
  int checked = 0;
  for (std::size_t p = 0; p < params.size(); ++p) {
    float* w = params[p].first->as<float>();
    const std::size_t n = params[p].first->bytes() / 4;
    double num = 0, den = 0;
    for (int probe = 0; probe < 4; ++probe) {
      const std::size_t i = pick() % n;
      const float keep = w[i], h = 1e-2f;
      auto loss_at = [&](float v) {
        w[i] = v;
        return model.forward_backward(tokens.data(), targets.data(), sequences, scale, s) * scale;
      };
      const double numeric = (loss_at(keep + h) - loss_at(keep - h)) / (2.0 * h);
      w[i] = keep;
      num += (numeric - grads[p][i]) * (numeric - grads[p][i]);
      den += numeric * numeric + grads[p][i] * grads[p][i];
      ++checked;
    }
    EXPECT_LT(std::sqrt(num / std::max(den, 1e-12)), 2e-2) << "parameter tensor " << p;
  }
  EXPECT_EQ(checked, int(params.size()) * 4);
}

TEST_F(GptModelTest, MicroBatchesAccumulateTheMiniBatchGradient) {
  const int sequences = 4, T = sequences * kTiny.seq;
  const auto tokens = token_ids(T, kTiny.vocab, 4), targets = token_ids(T, kTiny.vocab, 5);
  GptModel whole(kTiny, dev, alloc), parts(kTiny, dev, alloc);
  whole.init(9, s);
  parts.init(9, s);
  const double l1 = whole.forward_backward(tokens.data(), targets.data(), sequences, 1.f / T, s);
  double l2 = 0;
  for (int m = 0; m < 2; ++m)
    l2 += parts.forward_backward(tokens.data() + m * T / 2, targets.data() + m * T / 2, sequences / 2, 1.f / T, s);
  EXPECT_NEAR(l1, l2, 1e-4 * std::abs(l1));
  auto a = whole.parameters(), b = parts.parameters();
  for (std::size_t p = 0; p < a.size(); ++p) {
    const float *ga = a[p].second->as<float>(), *gb = b[p].second->as<float>();
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a[p].second->bytes() / 4; ++i) {
      num += (ga[i] - gb[i]) * double(ga[i] - gb[i]);
      den += double(ga[i]) * ga[i];
    }
    EXPECT_LT(std::sqrt(num / std::max(den, 1e-30)), 1e-5) << "parameter tensor " << p;
  }
}

TEST(EmbeddingCpu, GathersRowsAddsPositionsAndScattersGradients) {
  const EmbeddingShape sh{4, 2, 3, 5};
  const std::vector<std::int32_t> tokens = {4, 1, 4, 0};
  std::vector<float> table(15), pos(6), y(12);
  for (int i = 0; i < 15; ++i) table[i] = float(i);
  for (int i = 0; i < 6; ++i) pos[i] = 100.f * float(i);
  embedding_forward(Exec{}, sh, tokens.data(), table.data(), pos.data(), y.data());
  EXPECT_EQ(y[0], 12.f + 0.f);      // row 0: token 4, position 0
  EXPECT_EQ(y[3 + 2], 5.f + 500.f);  // row 1: token 1, position 1, column 2
  std::vector<float> dy(12, 1.f), dtable(15, 0.f), dpos(6, 0.f);
  embedding_backward(Exec{}, sh, tokens.data(), dy.data(), dtable.data(), dpos.data());
  EXPECT_EQ(dtable[4 * 3], 2.f);  // token 4 twice
  EXPECT_EQ(dtable[2 * 3], 0.f);  // token 2 never
  EXPECT_EQ(dpos[0], 2.f);
  const std::vector<std::int32_t> bad = {4, 1, 5, 0};
  EXPECT_THROW(embedding_forward(Exec{}, sh, bad.data(), table.data(), pos.data(), y.data()), Error);
}

// One rank's trainer of a tiny GPT over 2 sequences: dense, or with an MoE layer on every other FFN.
class GptTrainerStep : public ::testing::Test {
 protected:
  std::unique_ptr<Communicator> world = make_self_communicator();
  Device dev = Device::open(Backend::cpu);
  static constexpr ModelShape kShape{.layers = 2, .hidden = 8, .ffn = 16, .heads = 2, .seq = 5, .vocab = 11};
  static ParallelLayout layout(bool moe) { return ParallelLayout::of(moe ? LayoutKind::ppmoe : LayoutKind::dense, 1, 1, 1); }
  static GptConfig model(bool moe, ExpertGemm experts = ExpertGemm::grouped) {
    ModelShape shape = kShape;
    if (moe) {
      shape.experts = 4;
      shape.moe_every = 2;
    }
    GptConfig c = layout_model(shape, layout(moe));
    c.moe.expert_gemm = experts;
    return c;
  }
  std::unique_ptr<GptTrainer> make_trainer(bool moe = false, ExpertGemm experts = ExpertGemm::grouped) {
    return std::make_unique<GptTrainer>(*world, dev, Backend::cpu, layout(moe), model(moe, experts), 2, 1);
  }
  static std::vector<std::vector<float>> weights(GptTrainer& t) {
    std::vector<std::vector<float>> out;
    for (const TrainedParameter& p : t.parameters())
      out.emplace_back(p.weight->as<float>(), p.weight->as<float>() + p.weight->bytes() / 4);
    return out;
  }
};

}  // namespace

// A training step only enqueues its work -- forwards, backwards, the optimizer -- and never
// waits on the host: with the compute stream held by an op that waits for this test, step()
// still returns (a host wait inside it would hang until the timeout below).
TEST_F(GptTrainerStep, EnqueuesADenseStepWithoutWaitingOnTheHost) {
  auto owned = make_trainer();
  GptTrainer& trainer = *owned;
  trainer.step();  // the first step reads the masters
  dev.synchronize();
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  run_on(trainer.stream(), "held", [released] { released.wait(); });
  auto stepping = std::async(std::launch::async, [&] { trainer.step(); });
  const bool returned = stepping.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  release.set_value();
  stepping.get();
  dev.synchronize();
  EXPECT_TRUE(returned) << "step() waited on the host for its own work";
}

// The peak a step reports holds what a step needs at once: every parameter with its gradient
// and AdamW's two fp32 moments, plus the activations, which are gone again after the step.
TEST_F(GptTrainerStep, PeakBytesCoverTheModelStatesAndTheStepsActivations) {
  const GptConfig cfg = model(false);
  auto owned = make_trainer();
  GptTrainer& trainer = *owned;
  trainer.step();  // the optimizer's moments exist from the first step on
  dev.synchronize();
  const std::size_t settled = trainer.peak_bytes();
  trainer.reset_peak_bytes();
  EXPECT_LE(trainer.peak_bytes(), settled);
  trainer.step();
  dev.synchronize();
  const std::size_t H = cfg.hidden, F = cfg.ffn, params = cfg.vocab * H + cfg.seq * H + 2 * H +
                                                       cfg.layers * (4 * H + 4 * H * H + 2 * H * F);
  const std::size_t peak = trainer.peak_bytes();
  EXPECT_GE(peak, 4 * params * sizeof(float));  // weights, gradients, two moments
  trainer.reset_peak_bytes();  // between steps: the peak restarts from what stays
  const std::size_t idle = trainer.peak_bytes();
  EXPECT_GE(idle, 4 * params * sizeof(float));
  EXPECT_GT(peak, idle) << "the step's activations and temporaries came on top";
}

// What a step allocates comes back to the pool and is there for the next one: once the first
// steps have settled the optimizer's state, a step takes no block from the system.
TEST_F(GptTrainerStep, StepsAfterTheFirstTakeNoBlockFromTheSystem) {
  auto owned = make_trainer();
  GptTrainer& trainer = *owned;
  for (int k = 0; k < 2; ++k) trainer.step();
  dev.synchronize();
  const std::int64_t settled = trainer.pool_blocks_taken();
  EXPECT_GT(settled, 0);
  for (int k = 0; k < 3; ++k) trainer.step();
  dev.synchronize();
  EXPECT_EQ(trainer.pool_blocks_taken(), settled);
}

// A step captured into a graph and replayed is the eager step: after the same number of steps
// the loss and every weight are the same to the bit. The optimizer's step count lives on the
// device, so each replay's bias corrections are its own step's, not the captured one's.
TEST_F(GptTrainerStep, ReplaysOfACapturedStepAreEagerSteps) {
  auto eager_owned = make_trainer(), captured_owned = make_trainer();
  GptTrainer &eager = *eager_owned, &captured = *captured_owned;
  for (int k = 0; k < 4; ++k) eager.step();
  captured.capture_step();  // one eager step, then the capture
  EXPECT_TRUE(captured.step_captured());
  EXPECT_GT(captured.graph_nodes(), 20u);
  for (int k = 0; k < 3; ++k) captured.step();
  EXPECT_EQ(captured.loss_sum(), eager.loss_sum());
  const auto want = eager.parameters(), got = captured.parameters();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const float *w = want[i].weight->as<float>(), *g = got[i].weight->as<float>();
    for (std::size_t j = 0; j < want[i].weight->bytes() / 4; ++j) ASSERT_EQ(g[j], w[j]) << "parameter " << i << " value " << j;
  }
}

TEST_F(GptTrainerStep, AStepWithMoEBlocksIsNotCaptured) {
  auto owned = make_trainer(/*moe=*/true);
  GptTrainer& trainer = *owned;
  try {
    trainer.capture_step();
    ADD_FAILURE() << "an MoE step was captured";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expert counts on the host"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(trainer.step_captured());
  trainer.step();  // still steps eagerly
  dev.synchronize();
}

// With segmented experts the MoE blocks' counts stay on the device, so the step has no host wait
// and is captured (the CPU capture refuses any wait); its replays are its eager steps to the bit,
// and those equal the grouped route's steps, which read the counts on the host.
TEST_F(GptTrainerStep, AnMoEStepWithSegmentedExpertsIsCapturedAndReplaysItsEagerSteps) {
  auto grouped_owned = make_trainer(true), eager_owned = make_trainer(true, ExpertGemm::segmented),
       captured_owned = make_trainer(true, ExpertGemm::segmented);
  GptTrainer &grouped = *grouped_owned, &eager = *eager_owned, &captured = *captured_owned;
  for (int k = 0; k < 4; ++k) {
    grouped.step();
    eager.step();
  }
  captured.capture_step();
  ASSERT_TRUE(captured.step_captured());
  for (int k = 0; k < 3; ++k) captured.step();
  dev.synchronize();
  EXPECT_EQ(captured.loss_sum(), eager.loss_sum());
  EXPECT_NEAR(eager.loss_sum(), grouped.loss_sum(), 1e-5 * std::abs(grouped.loss_sum()));
  const auto want = weights(eager), got = weights(captured), other = weights(grouped);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << "parameter " << i;
    EXPECT_LT(testing_util::rel_diff(want[i].data(), other[i].data(), want[i].size()), 1e-5) << "parameter " << i;
  }
}

// The rows an MoE step's experts computed against the rows routed to them (gpt/step.csv's
// computed_rows_over_routed): the same where the route computes the rows alone; with padded
// blocks, the padding too; none counted where the counts stay on the device (segmented).
TEST_F(GptTrainerStep, TheExpertsComputedRowsAreTheRoutedOnesAndThePaddedRoutesPadding) {
  auto grouped_owned = make_trainer(true), padded_owned = make_trainer(true, ExpertGemm::padded),
       segmented_owned = make_trainer(true, ExpertGemm::segmented);
  GptTrainer &grouped = *grouped_owned, &padded = *padded_owned, &segmented = *segmented_owned;
  for (GptTrainer* t : {&grouped, &padded, &segmented}) t->step();
  dev.synchronize();
  const long long tokens = 2 * kShape.seq;  // one MoE block, top-1
  EXPECT_EQ(grouped.expert_rows(), tokens);
  EXPECT_EQ(grouped.expert_computed_rows(), tokens);
  EXPECT_EQ(padded.expert_rows(), tokens);
  EXPECT_GT(padded.expert_computed_rows(), tokens) << "ten rows over four experts fill no blocks of a row tile";
  EXPECT_EQ(segmented.expert_rows(), 0);
  EXPECT_EQ(segmented.expert_computed_rows(), 0);
}

// A step's breakdown times each of its phases under its path, as many times as the model runs
// it, and every phase that models/roofline.h gives FLOPs is one of them (step_breakdown.csv
// divides the two). Timing it changes nothing the step computes; a replayed step cannot be timed.
TEST_F(GptTrainerStep, ABreakdownTimesEveryPhaseOfTheStepUnderItsPath) {
  auto timed_owned = make_trainer(/*moe=*/true), plain_owned = make_trainer(/*moe=*/true);
  GptTrainer &timed = *timed_owned, &plain = *plain_owned;
  Breakdown b;
  timed.set_breakdown(&b);
  timed.step();
  dev.synchronize();
  timed.set_breakdown(nullptr);
  plain.step();
  EXPECT_EQ(timed.loss_sum(), plain.loss_sum());
  std::map<std::string, int> calls;  // per path
  std::map<std::string, std::set<std::string>> paths_of;  // per name
  for (const auto& t : b.path_totals()) {
    calls[t.path] = t.calls;
    paths_of[t.path.substr(t.path.rfind('/') + 1)].insert(t.path);
  }
  const int layers = kShape.layers, moe_layers = 1;
  const std::map<std::string, int> want = {
      {"gpt.step", 1},
      {"gpt.step/step.zero_grad", 1},
      {"gpt.step/model.fwd", 1},
      {"gpt.step/model.fwd/embed.fwd", 1},
      {"gpt.step/model.fwd/ln.fwd", 2 * layers},
      {"gpt.step/model.fwd/attention.fwd/attention.qkv.fwd", layers},
      {"gpt.step/model.fwd/attention.fwd/attention.core.fwd", layers},
      {"gpt.step/model.fwd/attention.fwd/attention.out.fwd", layers},
      {"gpt.step/model.fwd/ffn.fwd", layers - moe_layers},
      {"gpt.step/model.fwd/moe.fwd/moe.gating", moe_layers},
      {"gpt.step/model.fwd/moe.fwd/moe.expert", moe_layers},
      {"gpt.step/model.fwd/head.fwd", 1},
      {"gpt.step/model.bwd/head.bwd", 1},
      {"gpt.step/model.bwd/ffn.bwd", layers - moe_layers},
      {"gpt.step/model.bwd/moe.bwd/moe.expert.bwd", moe_layers},
      {"gpt.step/model.bwd/moe.bwd/moe.gating.bwd", moe_layers},
      {"gpt.step/model.bwd/ln.bwd", 2 * layers},
      {"gpt.step/model.bwd/attention.bwd/attention.core.bwd", layers},
      {"gpt.step/model.bwd/embed.bwd", 1},
      {"gpt.step/model.wgrad/head.wgrad", 1},
      {"gpt.step/model.wgrad/ffn.wgrad", layers - moe_layers},
      {"gpt.step/model.wgrad/attention.wgrad", layers},
      {"gpt.step/step.optimizer", 1}};
  for (const auto& [path, n] : want) {
    ASSERT_TRUE(calls.count(path)) << path << " was not timed";
    EXPECT_EQ(calls[path], n) << path;
  }
  EXPECT_FALSE(calls.count("gpt.step/model.fwd/ffn.allreduce")) << "no TP: no all-reduce range";
  ModelShape shape = kShape;
  shape.experts = 4;
  shape.moe_every = 2;
  for (const auto& [phase, work] : gpt_step_phases(shape, 2, 4))
    EXPECT_EQ(paths_of[phase].size(), 1u) << phase << " is not one range of the step";
  auto captured_owned = make_trainer();
  captured_owned->capture_step();
  EXPECT_THROW(captured_owned->set_breakdown(&b), Error);
  captured_owned->set_breakdown(nullptr);
}

// The MLP's GeLU lives in its GEMMs' epilogues: the first GEMM writes GeLU(z) and keeps z as its
// aux output, the backward's first GEMM applies GeLU's gradient from it; no GeLU kernel runs.
// Attention's score and context GEMMs run as one strided batch over every head of every sequence
// (two in the forward, four in the backward), not one GEMM per head or per sequence.
// The GPT bench validates the MoE of layout_model() before it builds the model: that config
// must carry the model's dtype (a bf16 model's segmented experts were refused on an H200 as fp32).
TEST(GptLayout, ItsMoEConfigCarriesTheModelsDtype) {
  const ModelShape shape{.layers = 2, .hidden = 1024, .ffn = 4096, .heads = 16, .seq = 8, .vocab = 11, .experts = 8,
                         .moe_every = 2};
  MoEConfig m = layout_model(shape, ParallelLayout::of(LayoutKind::ppmoe, 1, 1, 1), DType::bf16).moe;
  EXPECT_EQ(m.dtype, DType::bf16);
  m.expert_gemm = ExpertGemm::segmented;
  const auto refusal = m.validate_for(Backend::cuda);
  EXPECT_FALSE(refusal) << *refusal;
}

TEST(GptBlock, GeluInTheGemmEpiloguesAndAttentionBatchedOverEveryHeadAndSequence) {
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc(Backend::cpu);
  const Stream s = dev.create_stream("model");  // queued: its ops are on the timeline
  GptModel model(kTiny, dev, alloc);
  model.init(3, s);
  const int sequences = 2, T = sequences * kTiny.seq;
  const auto tokens = token_ids(T, kTiny.vocab, 1), targets = token_ids(T, kTiny.vocab, 2);
  std::map<std::string, int> count;
  {
    testing_util::RecordedTimeline timeline;
    model.forward_backward(tokens.data(), targets.data(), sequences, 1.f / T, s);
    s.synchronize();
    for (const TimelineEntry& e : timeline.entries()) {
      if (e.range) continue;
      ++count[e.name == "batched_gemm" ? "batched_gemm " + testing_util::arg_text(e, "epilogue") : e.name];
      if (e.name == "batched_gemm" && testing_util::arg_text(e, "epilogue") == "\"none\"") {
        EXPECT_EQ(testing_util::number_arg(e, "batch"), kTiny.heads * sequences) << e.args;
      }
    }
  }
  EXPECT_EQ(count["batched_gemm \"none\""], kTiny.layers * 6);
  EXPECT_EQ(count["gelu_forward"], 0);
  EXPECT_EQ(count["gelu_backward"], 0);
  EXPECT_EQ(count["batched_gemm \"gelu_aux\""], kTiny.layers);
  EXPECT_EQ(count["batched_gemm \"dgelu\""], kTiny.layers);
}

}  // namespace moebench
