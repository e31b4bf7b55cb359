// Shared by the expert-route tests (test_expert_routes.cpp, test_segmented_experts.cpp): a small
// layer whose experts compute by a given route, tokens steered to one hot expert, and one step
// of two routes compared.
#pragma once
#include <gtest/gtest.h>
#include <vector>
#include "moe_test_util.h"
#include "timeline_util.h"

namespace moebench::testing_util {

// h 16, f 24; the local experts compute by `route`.
inline MoEConfig route_config(ExpertGemm route, int experts, int k, bool keep_activation = true) {
  MoEConfig c = test_moe_config(experts, 1, k);
  c.expert_gemm = route;
  c.keep_expert_activation = keep_activation;
  return c;
}

// Tokens whose first feature is 1 go to expert `hot` (its gate column's first weight is large):
// all but the last two tokens of x.
inline void make_hot(CpuLayer& L, std::vector<float>& x, int tokens, int hot) {
  L.gate_w()[hot] = 20.f;  // row 0 of the [h, E] gate weights
  for (int t = 0; t < tokens - 2; ++t) x[std::size_t(t) * L.cfg().hidden] = 1.f;
}

// One step of `got` and `want` (same weights) on the same tokens, steered to expert 2 when `hot`:
// the same output, input gradient and gate and expert weight gradients. Then the experts' GEMMs
// alone (the overhead ratio's) on scratch leave `got`'s gradients as they were.
inline void expect_same_step(CpuLayer& got, CpuLayer& want, int tokens, bool hot) {
  const int h = want.cfg().hidden, E = want.cfg().experts;
  auto x = testing_util::tokens(tokens, h, 3);
  const auto dy = testing_util::tokens(tokens, h, 4);
  if (hot) {
    make_hot(want, x, tokens, 2);
    make_hot(got, x, tokens, 2);
  }
  want.forward(x);
  got.forward(x);
  want.backward(dy);
  got.backward(dy);
  const std::size_t n = std::size_t(E) * want.expert_weights();
  EXPECT_LT(rel_diff(got.y.data(), want.y.data(), x.size()), 1e-5);
  EXPECT_LT(rel_diff(got.dx.data(), want.dx.data(), x.size()), 1e-5);
  EXPECT_LT(rel_diff(got.gate_g(), want.gate_g(), std::size_t(h) * E), 1e-5);
  EXPECT_LT(rel_diff(got.w1_g(), want.w1_g(), n), 1e-5);
  EXPECT_LT(rel_diff(got.w2_g(), want.w2_g(), n), 1e-5);
  const std::vector<float> g1(got.w1_g(), got.w1_g() + n);
  TrackingAllocator scratch(Backend::cpu);
  got.layer->experts().gemms_only(got.ctx->experts, scratch, got.dev.default_stream());
  EXPECT_EQ(std::vector<float>(got.w1_g(), got.w1_g() + n), g1);
  EXPECT_GT(scratch.peak_total(), 0u);
}

// One step of L on a queued stream (so that its ops are on the timeline), tokens steered to
// expert `hot`: every entry recorded, and the padded route's block height in *padded.
inline std::vector<TimelineEntry> recorded_hot_step(CpuLayer& L, int tokens, int hot, int* padded = nullptr) {
  const int h = L.cfg().hidden;
  auto x = testing_util::tokens(tokens, h, 3);
  make_hot(L, x, tokens, hot);
  const auto dy = testing_util::tokens(tokens, h, 4);
  std::vector<float> y(x.size()), dx(x.size());
  const Stream s = L.dev.create_stream("layer");
  RecordedTimeline timeline;
  MoEContext ctx = L.layer->forward(x.data(), tokens, y.data(), s);
  L.layer->backward(ctx, dy.data(), dx.data(), s);
  s.synchronize();
  if (padded) *padded = ctx.experts.padded;
  return timeline.entries();
}

}  // namespace moebench::testing_util
