// The roofline's work counts against the sizes worked by hand, which term sets the floor, the
// rates a rank gets when CPU ranks share the machine's cores, and which profiles a run may use.
#include <gtest/gtest.h>
#include <filesystem>
#include <fstream>
#include <map>
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
  // The whole step's bytes: weights read twice and gradients written, AdamW's traffic, per layer
  // and token 7 h + 2 f saved activations and the logits, each written and read once, in bf16.
  const double dense_weights = 50304.0 * h + 2048 * h + 24 * (4 * h * h + 2 * h * f);
  EXPECT_DOUBLE_EQ(gpt_step_work(m, 2, 2).bytes,
                   3 * dense_weights * 2 + dense_weights * 28 + 2 * tokens * 24 * (7 * h + 2 * f) * 2 + 2 * tokens * 50304 * 2);
  // The step's phases (its breakdown's ranges) hold all of its FLOPs, each phase once; each moves
  // its own least bytes -- AdamW per weight a bf16 gradient read, fp32 m, v and master read and
  // written, the weight written -- and, each boundary a round trip, together more than the step.
  for (const ModelShape& shape : {m, moe}) {
    double flops = 0, bytes = 0;
    std::map<std::string, Work> by_name;
    for (const auto& [phase, work] : gpt_step_phases(shape, 2, 2)) {
      EXPECT_GT(work.bytes, 0) << phase;
      EXPECT_TRUE(by_name.emplace(phase, work).second) << phase << " twice";
      flops += work.flops;
      bytes += work.bytes;
    }
    const double weights = 50304.0 * h + 2048 * h + 24 * 4 * h * h +
                           (shape.experts ? 12 * (2 * h * f) + 12 * (8 * 2 * h * f + h * 8) : 24 * 2 * h * f);
    EXPECT_DOUBLE_EQ(by_name["step.optimizer"].bytes, weights * (2 + 24 + 2));
    EXPECT_EQ(by_name["step.optimizer"].flops, 0);
    // Flash-style attention's least traffic: q, k, v in and o out, the fp32 logsumexp per head;
    // its backward q, k, v, o, do in and dq, dk, dv out. No S x S tensor.
    EXPECT_DOUBLE_EQ(by_name["attention.core.fwd"].bytes, 24 * tokens * (4 * h * 2 + 4 * 16));
    EXPECT_DOUBLE_EQ(by_name["attention.core.bwd"].bytes, 24 * tokens * (8 * h * 2 + 4 * 16));
    EXPECT_DOUBLE_EQ(by_name["ln.fwd"].bytes, 2 * 24 * tokens * (2 * h * 2 + 8));  // two per layer: x in, y, mean, rstd out
    EXPECT_DOUBLE_EQ(by_name["head.wgrad"].bytes, tokens * 50304 * 2 + tokens * h * 2 + 2 * 50304 * h * 2);
    EXPECT_EQ(by_name["ln.bwd"].flops, 0);
    EXPECT_NEAR(flops, gpt_step_work(shape, 2, 2).flops, 1e-12 * flops);
    EXPECT_GT(bytes, gpt_step_work(shape, 2, 2).bytes);
    EXPECT_EQ(by_name.count("ffn.fwd"), 1u);  // the dense FFNs between the MoE layers too
    EXPECT_EQ(by_name.count("moe.expert.bwd"), shape.experts > 0 ? 1u : 0u);
    if (shape.experts > 0) {  // 12 MoE layers, 8 experts, top-2: 2 x 4096 rows each
      const double rows = 2 * tokens, expert_weights = 12 * 8 * 2 * h * f * 2;
      EXPECT_DOUBLE_EQ(by_name["moe.expert"].bytes, 12 * rows * (2 * h + f) * 2 + expert_weights);
      EXPECT_DOUBLE_EQ(by_name["moe.expert.bwd"].bytes, 12 * rows * (3 * h + f) * 2 + 2 * expert_weights);
      EXPECT_DOUBLE_EQ(by_name["moe.expert.bwd"].flops, 2 * 12 * 2 * rows * 2 * h * f);
    }
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

// A profile as moebench_profile writes one: every row stamped with where and in what dtype it ran.
std::string write_profile(const std::string& name, const std::string& backend, const std::string& dtype) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream out(path);
  const std::string stamp = "," + backend + ",Some GPU," + dtype + "\n";
  out << "field,at,value,unit,source,backend,device,dtype\n";
  out << "name,,a machine,," << stamp;
  for (const char* row : {"gpus_per_node,,1,count", "peak_fp16,,400,TFLOP/s", "peak_fp32,,400,TFLOP/s", "memory,,80,GB",
                          "memory_bw,,4000,GB/s", "elementwise_bw,,2500,GB/s", "intra_bw,,450,GB/s", "intra_latency,,3,us",
                          "inter_bw,,400,GB/s", "inter_latency,,5,us", "pcie_bw,,60,GB/s", "gemm_efficiency,100,1,fraction"})
    out << row << ",measured" << stamp;
  return path;
}

// On a GPU the sweep measures one precision's peak and copies it into the other's row: a bf16 run
// given an fp32 sweep would take TF32's rate for its compute floor. Its columns are n/a instead.
TEST(Roofline, AGpuProfileOfTheOtherPrecisionIsNotUsed) {
  const std::string fp32 = write_profile("roofline_fp32_profile.csv", "cuda", "fp32");
  const std::string bf16 = write_profile("roofline_bf16_profile.csv", "cuda", "bf16");
  const RooflineProfile mixed = load_roofline_profile("--roofline-profile", fp32, "cuda", "Some GPU", "bf16", 1, 2);
  EXPECT_FALSE(mixed.hw);
  EXPECT_NE(mixed.note.find("measured fp32 GEMMs, this run is bf16"), std::string::npos) << mixed.note;
  EXPECT_FALSE(load_roofline_profile("--roofline-profile", bf16, "cuda", "Some GPU", "fp32", 1, 2).hw);
  EXPECT_TRUE(load_roofline_profile("--roofline-profile", bf16, "cuda", "Some GPU", "bf16", 1, 2).hw);
  EXPECT_TRUE(load_roofline_profile("--roofline-profile", bf16, "cuda", "Some GPU", "fp16", 1, 2).hw);
  EXPECT_TRUE(load_roofline_profile("--roofline-profile", fp32, "cuda", "Some GPU", "fp32", 1, 2).hw);
  // The CPU computes fp32 whatever the dtype: its one peak serves every run.
  const std::string cpu = write_profile("roofline_cpu_profile.csv", "cpu", "fp32");
  EXPECT_TRUE(load_roofline_profile("--roofline-profile", cpu, "cpu", "Some GPU", "bf16", 1, 2).hw);
  for (const auto& p : {fp32, bf16, cpu}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace moebench
