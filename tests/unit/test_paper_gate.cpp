// M6-T's own gate (GateImpl::paper: looped arg-max, one-hot dispatch and combine tensors)
// against ours: the same routing -- experts, weights, positions, counts -- and the same layer
// outputs and gradients; its dense tensors hold exactly the kept assignments; a hand-worked
// routing; bad configurations named.
#include <gtest/gtest.h>
#include <functional>
#include "kernels/looped_gating.h"
#include "moe_test_util.h"

namespace moebench {
using namespace testing_util;

static MoEConfig config(int experts, int prototypes, int k, double capacity, GateImpl gate) {
  MoEConfig c = test_moe_config(experts, prototypes, k, 12, 20);
  c.capacity_factor = capacity;
  c.aux_coef = 0.1f;
  c.gate = gate;
  return c;
}

struct Shape {
  int experts, prototypes, k, groups;
  double capacity;
};
static const Shape kShapes[] = {{8, 1, 1, 1, 1.0}, {8, 1, 2, 1, 0.75}, {8, 1, 4, 2, 1.25},
                                {8, 2, 2, 2, 1.0}, {8, 4, 1, 1, 0.5},  {16, 1, 16, 1, 1.0}};

// The same layer (weights, capacity groups) with each gate.
struct GatePair {
  // paper_route: the paper gate's experts (the fused gate's stay grouped); padded with its costs
  // taken away, so that the busier experts go to the overflow.
  explicit GatePair(const Shape& sh, ExpertGemm paper_route = ExpertGemm::grouped)
      : paper(with_route(config(sh.experts, sh.prototypes, sh.k, sh.capacity, GateImpl::paper), paper_route), local(sh)),
        fused(config(sh.experts, sh.prototypes, sh.k, sh.capacity, GateImpl::fused), local(sh)) {}
  static MoEConfig with_route(MoEConfig c, ExpertGemm route) {
    c.expert_gemm = route;
    c.padded_cost = {0, 1};
    return c;
  }
  static std::function<std::unique_ptr<TokenDispatcher>(const DispatcherEnv&)> local(const Shape& sh) {
    return [groups = sh.groups](const DispatcherEnv& env) { return make_local_dispatcher(env, groups); };
  }
  CpuLayer paper, fused;
};

static std::string describe(const Shape& sh) {
  return "E=" + std::to_string(sh.experts) + " Z=" + std::to_string(sh.prototypes) + " k=" + std::to_string(sh.k) +
         " G=" + std::to_string(sh.groups);
}

TEST(PaperGate, RoutesExactlyAsTheFusedGate) {
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(describe(sh));
    GatePair layers(sh);
    CpuLayer &paper = layers.paper, &fused = layers.fused;
    const auto x = tokens(24, 12, 3);
    paper.forward(x);
    fused.forward(x);
    const Routing &p = paper.routing(), &f = fused.routing();
    ASSERT_TRUE(p.one_hot());
    ASSERT_FALSE(f.one_hot());
    EXPECT_EQ(paper.slots(p.expert), fused.slots(f.expert));
    EXPECT_EQ(paper.slots(p.position), fused.slots(f.position));
    const std::size_t ts = std::size_t(24) * p.slots();
    EXPECT_EQ(0, std::memcmp(p.weight.data(), f.weight.data(), ts * 4));
    EXPECT_EQ(p.routed, f.routed);
    EXPECT_EQ(p.kept, f.kept);
    EXPECT_DOUBLE_EQ(paper.aux_loss(), fused.aux_loss());
    int dropped = 0;
    for (auto v : paper.slots(p.position)) dropped += v < 0;
    if (sh.capacity < 1.0) {
      EXPECT_GT(dropped, 0) << "the case is meant to drop";
    }

    // The dense tensors hold the kept assignments and nothing else.
    const int E = sh.experts, C = p.shape.capacity;
    const float* comb = p.combine.as<float>();
    const float* disp = p.dispatch.as<float>();
    const auto ex = paper.slots(p.expert), pos = paper.slots(p.position);
    std::vector<float> want(std::size_t(24) * E * C, 0.f);
    for (std::size_t i = 0; i < ts; ++i)
      if (pos[i] >= 0) want[(i / p.slots() * E + ex[i]) * C + pos[i]] = p.weight.as<float>()[i];
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(comb[i], want[i]) << "combine at " << i;
      ASSERT_EQ(disp[i], want[i] != 0.f ? 1.f : 0.f) << "dispatch at " << i;
    }
  }
}

TEST(PaperGate, LayerOutputsAndGradientsEqualTheFusedGates) {
  for (ExpertGemm route : {ExpertGemm::grouped, ExpertGemm::padded})
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(describe(sh) + ", the paper gate's experts " + expert_gemm_name(route));
    GatePair layers(sh, route);
    CpuLayer &paper = layers.paper, &fused = layers.fused;
    const auto x = tokens(24, 12, 5), dy = tokens(24, 12, 6);
    paper.forward(x);
    fused.forward(x);
    EXPECT_LT(rel_diff(paper.y.data(), fused.y.data(), x.size()), 1e-6);
    paper.backward(dy);
    fused.backward(dy);
    EXPECT_LT(rel_diff(paper.dx.data(), fused.dx.data(), x.size()), 1e-6);
    EXPECT_LT(rel_diff(paper.gate_g(), fused.gate_g(), std::size_t(12) * sh.experts), 1e-6);
    const std::size_t w = paper.expert_weights() * sh.experts;
    EXPECT_LT(rel_diff(paper.w1_g(), fused.w1_g(), w), 1e-6);
    EXPECT_LT(rel_diff(paper.w2_g(), fused.w2_g(), w), 1e-6);
  }
}

// Hand-worked: 4 tokens, 3 experts, top-2, C = 2. Probabilities (rows): t0 (.5,.3,.2),
// t1 (.6,.1,.3), t2 (.2,.7,.1), t3 (.4,.35,.25). Round 0 winners 0,0,1,0: expert 0 takes t0
// (pos 0), t1 (pos 1), t3 would be pos 2 -> dropped; expert 1 takes t2 (pos 0). Round 1 winners
// 1,2,0,1: expert 1 has 1 already -> t0 pos 1, t3 pos 2 dropped; expert 2: t1 pos 0; expert 0
// has 3 routed -> t2 pos 3 dropped.
TEST(PaperGate, LoopedRoundsOnAHandWorkedRouting) {
  CapacityShape c;
  c.gate = GateShape{4, 3, 1, 2};
  c.groups = 1;
  c.capacity = 2;
  const std::vector<float> probs = {.5f, .3f, .2f, .6f, .1f, .3f, .2f, .7f, .1f, .4f, .35f, .25f};
  std::vector<float> remaining = probs, one_hot(12), weight(8), combine(24, 0.f), dispatch(24);
  std::vector<std::int32_t> expert(8), position(8), routed(3, 0), kept(3), dense(12);
  for (int j = 0; j < 2; ++j) {
    argmax_round_cpu(c.gate, j, probs.data(), remaining.data(), expert.data(), weight.data(), one_hot.data());
    cumsum_positions_round_cpu(c, j, one_hot.data(), routed.data(), kept.data(), dense.data(), expert.data(),
                               position.data());
    combine_round_cpu(c, j, expert.data(), position.data(), weight.data(), combine.data(), dispatch.data());
  }
  EXPECT_EQ(expert, (std::vector<std::int32_t>{0, 1, 0, 2, 1, 0, 0, 1}));
  EXPECT_EQ(position, (std::vector<std::int32_t>{0, 1, 1, 0, 0, -1, -1, -1}));
  EXPECT_EQ(routed, (std::vector<std::int32_t>{4, 3, 1}));
  EXPECT_EQ(kept, (std::vector<std::int32_t>{2, 2, 1}));
  EXPECT_FLOAT_EQ(combine[(1 * 3 + 2) * 2 + 0], .3f);  // t1, expert 2, position 0
  float total = 0;
  for (float v : combine) total += v;
  EXPECT_FLOAT_EQ(total, .5f + .3f + .6f + .3f + .7f);
  std::vector<float> dcombine(24);
  for (int i = 0; i < 24; ++i) dcombine[i] = float(i + 1);
  std::vector<float> dweight(8);
  gather_slot_grads_cpu(c, expert.data(), position.data(), dcombine.data(), dweight.data());
  EXPECT_EQ(dweight, (std::vector<float>{1, 4, 8, 11, 15, 0, 0, 0}));
}

TEST(PaperGate, BadConfigurationsNameTheOption) {
  MoEConfig c = config(8, 1, 2, 1.0, GateImpl::paper);
  c.capacity_factor.reset();
  auto e = c.validate(16, 1);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("--gate paper"), std::string::npos);
  EXPECT_NE(e->find("--capacity-factor"), std::string::npos);
  c = config(8, 1, 2, 1.0, GateImpl::paper);
  c.dtype = DType::bf16;
  e = c.validate(16, 1);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("--dtype"), std::string::npos);
}

}  // namespace moebench
