// The roofline's work counts against the sizes worked by hand, which term sets the floor, and
// the rates a rank gets when CPU ranks share the machine's cores.
#include <gtest/gtest.h>
#include <set>
#include <string>
#include "models/hardware_profile.h"
#include "models/roofline.h"

namespace moebench {
namespace {

TEST(Roofline, MoELayerWorkByHand) {
  // 8192 tokens, h 1024, f 4096, 64 experts on one rank, top-1 (8192 rows), 16-bit.
  const Work w = moe_layer_work(8192, 1024, 4096, 64, 64, 8192, 2);
  EXPECT_DOUBLE_EQ(w.flops, 6.0 * 8192 * 1024 * 64 + 12.0 * 8192 * 1024 * 4096);  // ~415 GFLOP
  const double weights = 2.0 * 64 * 1024 * 4096 * 2;                                // ~1.07 GB
  EXPECT_DOUBLE_EQ(w.bytes, 3 * (weights + 1024.0 * 64 * 4) + 4.0 * 8192 * 1024 * 2 + 2.0 * 8192 * 4096 * 2);
  // The experts alone: their GEMMs, weights and hidden activation, without the gate and the tokens.
  const Work experts = moe_expert_work(1024, 4096, 64, 8192, 2);
  EXPECT_DOUBLE_EQ(experts.flops, 12.0 * 8192 * 1024 * 4096);
  EXPECT_DOUBLE_EQ(experts.bytes, 3 * weights + 2.0 * 8192 * 4096 * 2);
  // On an H100 node's profile it is memory-bound: 3.2 GB of weights and gradients dominate.
  const HardwareProfile h100 = load_hardware_profile(resolve_profile("h100-node"));
  const Roofline r = roofline(w, h100, true, 1.0, 2.0);
  EXPECT_EQ(r.bound, "memory");
  EXPECT_NEAR(r.floor_ms, 1e3 * w.bytes / h100.memory_bw, 1e-9);
  EXPECT_NEAR(r.time_over_floor, 2.0 / r.floor_ms, 1e-12);
  EXPECT_NEAR(r.achieved_tflops, w.flops / 2e-3 / 1e12, 1e-9);
}

TEST(Roofline, GptStepWorkByHand) {
  ModelShape m{.layers = 24, .hidden = 1024, .ffn = 4096, .heads = 16, .seq = 2048, .vocab = 50304};
  const double tokens = 2.0 * 2048, h = 1024, f = 4096;
  const double forward = 2 * tokens * h * 50304 + 2 * 2.0 * 24 * 2048 * 2048 * h + 24 * 2 * tokens * (4 * h * h + 2 * h * f);
  EXPECT_DOUBLE_EQ(gpt_step_work(m, 2, 2).flops, 3 * forward);  // ~9.9 TFLOP with causal attention
  // Top-1 MoE on every other FFN: the same expert FLOPs per token plus the gate; top-2 doubles the experts'.
  ModelShape moe = m;
  moe.experts = 8;
  moe.moe_every = 2;
  EXPECT_DOUBLE_EQ(gpt_step_work(moe, 2, 2).flops - gpt_step_work(m, 2, 2).flops, 3 * 12 * 2 * tokens * h * 8);
  moe.top_k = 2;
  EXPECT_DOUBLE_EQ(gpt_step_work(moe, 2, 2).flops - gpt_step_work(m, 2, 2).flops,
                   3 * 12 * (2 * tokens * h * 8 + 2 * tokens * 2 * h * f));
  EXPECT_GT(gpt_step_work(moe, 2, 2).bytes, gpt_step_work(m, 2, 2).bytes);  // eight experts' weights
  // The step's phases (its breakdown's ranges) hold all of its FLOPs, each phase once, and AdamW's
  // bytes: per weight a bf16 gradient read, fp32 m, v and master read and written, the weight written.
  for (const ModelShape& shape : {m, moe}) {
    double sum = 0;
    std::set<std::string> names;
    for (const auto& [phase, work] : gpt_step_phases(shape, 2, 2)) {
      EXPECT_GT(work.flops + work.bytes, 0) << phase;
      EXPECT_TRUE(names.insert(phase).second) << phase << " twice";
      sum += work.flops;
      if (phase == "step.optimizer") {
        const double weights = 50304.0 * h + 2048 * h + 24 * 4 * h * h +
                               (shape.experts ? 12 * (2 * h * f) + 12 * (8 * 2 * h * f + h * 8) : 24 * 2 * h * f);
        EXPECT_DOUBLE_EQ(work.bytes, weights * (2 + 24 + 2));
        EXPECT_EQ(work.flops, 0);
      } else {
        EXPECT_EQ(work.bytes, 0) << phase;
      }
    }
    EXPECT_NEAR(sum, gpt_step_work(shape, 2, 2).flops, 1e-12 * sum);
    EXPECT_EQ(names.count("moe.expert.bwd"), shape.experts > 0 ? 1u : 0u);
  }
}

TEST(Roofline, CpuRanksShareTheCores) {
  HardwareProfile hw;
  hw.gpus_per_node = 4;  // measured with 4 ranks on 2 cores: each rank had half a core
  EXPECT_DOUBLE_EQ(rank_rate_scale(hw, false, 4, 2), 1.0);
  EXPECT_DOUBLE_EQ(rank_rate_scale(hw, false, 2, 2), 2.0);  // a core each
  EXPECT_DOUBLE_EQ(rank_rate_scale(hw, false, 1, 2), 2.0);  // one rank computes on one core
  EXPECT_DOUBLE_EQ(rank_rate_scale(hw, true, 8, 2), 1.0);   // a GPU per rank
  hw.gpus_per_node = 1;
  EXPECT_DOUBLE_EQ(rank_rate_scale(hw, false, 4, 2), 0.5);
}

}  // namespace
}  // namespace moebench
