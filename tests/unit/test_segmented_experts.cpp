// The experts' segmented route (--expert-gemm segmented) against the grouped one: the same layer
// -- empty experts, a hot one, top-2, capacity drops over two groups, GeLU recomputed, PPMoE's
// index selection -- done its own way: six segment GEMMs per step and nothing read on the host,
// so that a layer's forward and backward are captured into a graph (the CPU capture refuses any
// host wait) where the grouped route's are refused.
#include <gtest/gtest.h>
#include <algorithm>
#include <string>
#include <vector>
#include "expert_route_run.h"
#include "runtime/stream_graph.h"

namespace moebench {
using namespace testing_util;


TEST(SegmentedExperts, EqualTheGroupedLayerWithEmptyHotAndDroppingExperts) {
  struct Case {
    const char* name;
    int experts, k, tokens, groups;
    bool hot, keep;
    double capacity;  // 0: dropless
  };
  for (const Case& cs : {Case{"few tokens: empty experts", 8, 1, 5, 1, false, true, 0},
                         Case{"a hot expert, top-2", 4, 2, 24, 1, true, true, 0},
                         Case{"a hot expert, GeLU recomputed", 4, 1, 24, 1, true, false, 0},
                         Case{"capacity drops in two groups", 4, 2, 24, 2, true, true, 0.5}}) {
    SCOPED_TRACE(cs.name);
    MoEConfig g = route_config(ExpertGemm::grouped, cs.experts, cs.k, cs.keep),
              sg = route_config(ExpertGemm::segmented, cs.experts, cs.k, cs.keep);
    if (cs.capacity > 0) g.capacity_factor = sg.capacity_factor = cs.capacity;
    auto local = [&](const DispatcherEnv& env) { return make_local_dispatcher(env, cs.groups); };
    CpuLayer grouped(g, local), segmented(sg, local);
    expect_same_step(segmented, grouped, cs.tokens, cs.hot);
    EXPECT_TRUE(segmented.ctx->routing.kept.empty()) << "the gate copied its counts to the host";
    EXPECT_TRUE(segmented.ctx->dispatch->rows_per_expert.empty());
    // The counts come to the host when asked, after the step: the grouped route's rows and loads.
    EXPECT_THROW(segmented.load(), Error);
    segmented.layer->read_counts(*segmented.ctx, segmented.dev.default_stream());
    EXPECT_EQ(segmented.ctx->experts.rows, grouped.ctx->experts.rows);
    EXPECT_EQ(segmented.load().kept, grouped.load().kept);
    EXPECT_EQ(segmented.ctx->routing.aux_loss(), grouped.aux_loss());
    const std::size_t assignments = std::size_t(cs.tokens) * cs.k, bound = segmented.ctx->dispatch->row_bound;
    if (cs.capacity > 0) {
      EXPECT_GT(grouped.load().dropped_fraction, 0.0) << "the case drops nothing";
      const int C = segmented.ctx->routing.shape.capacity;
      EXPECT_EQ(bound, std::size_t(cs.experts) * cs.groups * C) << "the buffers hold the experts' capacity";
      EXPECT_LT(bound, assignments);
    } else {
      EXPECT_EQ(bound, assignments) << "dropless: the buffers hold every assignment";
    }
    if (!cs.hot) {
      const auto& rows = segmented.ctx->experts.rows;
      EXPECT_GT(std::count(rows.begin(), rows.end(), 0), 0) << "no expert is empty";
    }
  }
}

// Forward is two segment GEMMs (GeLU in the first's epilogue), backward four (GeLU's gradient in
// the first's, the weight gradients in the weights form), each over every expert; no other GEMM
// touches the experts' rows and no GeLU kernel runs.
TEST(SegmentedExperts, SixSegmentGemmsPerStepEachOverEveryExpert) {
  const int E = 4, T = 24;
  CpuLayer L(route_config(ExpertGemm::segmented, E, 1), local_dispatcher);
  const std::vector<TimelineEntry> all = recorded_hot_step(L, T, 1);
  std::vector<std::string> steps;
  int gemms = 0;
  for (const TimelineEntry& e : all) {
    EXPECT_TRUE(e.name != "gelu_forward" && e.name != "gelu_backward" && e.name != "batched_gemm" &&
                e.name != "grouped_gemm")
        << e.name;
    if (!e.range && e.name == "gemm") ++gemms;
    if (e.range || e.name != "segment_gemm") continue;
    EXPECT_EQ(number_arg(e, "segments"), E);
    steps.push_back(arg_text(e, "form") + " " + arg_text(e, "epilogue"));
  }
  EXPECT_EQ(gemms, 3) << "the gate's projection forward and its two backward GEMMs";
  const std::vector<std::string> want = {"\"rows\" \"gelu_aux\"", "\"rows\" \"none\"",     "\"rows\" \"dgelu\"",
                                         "\"weights\" \"none\"",  "\"weights\" \"none\"", "\"rows\" \"none\""};
  EXPECT_EQ(steps, want);
}

// The mechanism the route exists for: a whole layer step, forward and backward, captured into a
// graph and replayed, equal to the eager step; the grouped route's gate waits for its counts, which
// the capture refuses.
TEST(SegmentedExperts, ALayerStepIsCapturedWhereTheGroupedRoutesIsRefused) {
  const int E = 4, T = 24, h = 16;
  auto x = tokens(T, h, 3);
  const auto dy = tokens(T, h, 4);
  CpuLayer eager(route_config(ExpertGemm::segmented, E, 2), local_dispatcher);
  make_hot(eager, x, T, 1);
  eager.forward(x);
  eager.backward(dy);
  for (ExpertGemm route : {ExpertGemm::segmented, ExpertGemm::grouped}) {
    SCOPED_TRACE(route == ExpertGemm::segmented ? "segmented" : "grouped");
    CpuLayer L(route_config(route, E, 2), local_dispatcher);
    L.gate_w()[1] = 20.f;
    std::vector<float> y(x.size(), 0.f), dx(x.size(), 0.f);
    const Stream s = L.dev.create_stream("layer");
    auto step = [&] {
      L.layer->zero_grad(s);
      MoEContext c = L.layer->forward(x.data(), T, y.data(), s);
      L.layer->backward(c, dy.data(), dx.data(), s);
    };
    if (route == ExpertGemm::grouped) {
      try {
        StreamGraph refused(L.alloc, s, step);
        ADD_FAILURE() << "the grouped route's step was captured";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("the host waits for"), std::string::npos) << e.what();
      }
      continue;
    }
    StreamGraph graph(L.alloc, s, step);
    graph.replay(s);
    s.synchronize();
    const std::size_t n = std::size_t(E) * eager.expert_weights();
    EXPECT_EQ(y, eager.y);
    EXPECT_EQ(dx, eager.dx);
    EXPECT_EQ(std::vector<float>(L.w1_g(), L.w1_g() + n), std::vector<float>(eager.w1_g(), eager.w1_g() + n));
    EXPECT_EQ(std::vector<float>(L.gate_g(), L.gate_g() + std::size_t(h) * E),
              std::vector<float>(eager.gate_g(), eager.gate_g() + std::size_t(h) * E));
  }
}

TEST(SegmentedExperts, RefusedWhereTheCountsMustReachTheHost) {
  MoEConfig c = route_config(ExpertGemm::segmented, 4, 1);
  c.gate = GateImpl::paper;
  c.capacity_factor = 1.0;
  const auto paper = c.validate(8, 1);
  ASSERT_TRUE(paper);
  EXPECT_NE(paper->find("--expert-gemm segmented"), std::string::npos) << *paper;
  c = route_config(ExpertGemm::segmented, 4, 1);
  const auto fp32 = c.validate_for(Backend::cuda);
  ASSERT_TRUE(fp32);
  EXPECT_EQ(fp32->rfind("--expert-gemm segmented: on cuda", 0), 0u) << *fp32;
  c.dtype = DType::bf16;
  EXPECT_FALSE(c.validate_for(Backend::cuda));
  c.ffn = 36;
  EXPECT_TRUE(c.validate_for(Backend::cuda));
  EXPECT_FALSE(c.validate_for(Backend::cpu));
  auto world = make_self_communicator();
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc(Backend::cpu);
  try {
    make_expert_parallel_dispatcher(DispatcherEnv{route_config(ExpertGemm::segmented, 4, 1), dev, alloc}, *world);
    ADD_FAILURE() << "the expert-parallel dispatcher took device counts";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--expert-gemm segmented"), std::string::npos) << e.what();
  }
}

}  // namespace moebench
