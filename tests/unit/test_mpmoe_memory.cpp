// MPMoE's memory model (Eq. 1-6) against hand-computed values, and the pipelined layer's
// measured memory against it: sharing T_DI, T_M and T_DO among n parts saves what Eq. 5 says.
#include <gtest/gtest.h>
#include "models/mpmoe_memory.h"
#include "moe/pipelined_layer.h"
#include "moe_test_util.h"

namespace moebench {
using namespace testing_util;

TEST(MPMoEMemoryModel, EquationsOneToSixByHand) {
  // GPT-S's layer (003 Table 3), 64 experts, B = 1024, n = 4.
  const MemoryModel m = mpmoe_memory_model({1024, 768, 3072, 64, 1, 4});
  EXPECT_DOUBLE_EQ(m.model_states, 4.0 * (64 * 768 + 2 * 3072 * 768));  // 19 070 976
  EXPECT_DOUBLE_EQ(m.activations, 4.0 * 1024 * 768 + 1024.0 * 3072);     // 6 291 456
  EXPECT_DOUBLE_EQ(m.buffers, 1024.0 * 768 + 1024.0 * 3072);
  EXPECT_DOUBLE_EQ(m.activations_pipe, m.activations);
  EXPECT_DOUBLE_EQ(m.saving_activations, 1024.0 * (768 + 2304));         // 3 145 728
  EXPECT_NEAR(m.saving_ratio, 2 * 3145728.0 / (19070976.0 + 2 * 6291456.0), 1e-12);
  // n = 2 shares nothing of T_DI and T_DO (two buffers are all of them), half of T_M.
  EXPECT_DOUBLE_EQ(mpmoe_memory_model({1024, 768, 3072, 64, 1, 2}).saving_activations, 1024.0 * 3072 / 2);
}

// Tokens routed round-robin (token t to expert t mod E, top-1) so every part of every split
// holds the same rows: then the activations a layer holds at its peak differ between PMoE and
// MPMoE by exactly what Eq. 5 counts. Counted: T_DI (dispatched rows), T_M (the experts'
// pre-activation, the one [rows, f] tensor both modes keep) and T_DO (expert outputs), in the
// activations tag. Not counted because both modes hold the same: routing data (logits, slots,
// row maps, the slices), T_O (the combine's returned rows), and the caller's T_I and output.
// Pinned host copies (S1-S3) are host memory, apart from the device tags.
TEST(MPMoEMemory, SharingSavesWhatEquationFiveSays) {
  MoEConfig cfg;
  cfg.hidden = 16;  // M
  cfg.ffn = 32;     // H
  cfg.experts = 4;
  cfg.top_k = 1;
  cfg.aux_loss = false;
  const int n = 4, T = n * cfg.experts * 3;
  Device dev = Device::open(Backend::cpu);
  const PipelineStreams streams{dev.create_stream("compute"), dev.create_stream("dispatch"),
                                dev.create_stream("combine"), dev.create_stream("copy")};
  std::vector<float> x(std::size_t(T) * cfg.hidden, 0.f), dy = tokens(T, cfg.hidden, 5);
  for (int t = 0; t < T; ++t) x[std::size_t(t) * cfg.hidden + t % cfg.experts] = 4.f;
  auto peak_activations = [&](MemoryReuse reuse) {
    auto comm = make_self_communicator(), comm2 = make_self_communicator();
    TrackingAllocator alloc(Backend::cpu);
    PipelineConfig pipe;
    pipe.partitions = n;
    pipe.reuse = reuse;
    PipelinedMoELayer layer(cfg, pipe, dev, alloc, *comm, *comm2);
    layer.init(3, streams.compute);
    float* wg = layer.gate().weight().as<float>();  // [h, E]: logit e = 4 x[e]
    for (int i = 0; i < cfg.hidden; ++i)
      for (int e = 0; e < cfg.experts; ++e) wg[i * cfg.experts + e] = i == e ? 1.f : 0.f;
    std::vector<float> y(x.size()), dx(x.size());
    alloc.reset_peaks();
    PipelinedContext c = layer.forward(x.data(), T, y.data(), streams);
    for (const auto& p : c.parts) EXPECT_EQ(p.routing.kept, std::vector<std::int32_t>(cfg.experts, 3));
    layer.backward(c, dy.data(), dx.data(), streams);
    dev.synchronize();
    return double(alloc.peak(MemTag::activations));
  };
  const double pmoe = peak_activations(MemoryReuse::none);
  const double eq5_bytes = 4.0 * mpmoe_memory_model({double(T), double(cfg.hidden), double(cfg.ffn), 4, 1, n}).saving_activations;
  for (MemoryReuse reuse : {MemoryReuse::s1, MemoryReuse::s2, MemoryReuse::s3, MemoryReuse::s4}) {
    const double saved = pmoe - peak_activations(reuse);
    EXPECT_NEAR(saved / eq5_bytes, 1.0, 0.02) << reuse_name(reuse) << ": saved " << saved << " bytes, Eq. 5 "
                                               << eq5_bytes;
  }
}

}  // namespace moebench
