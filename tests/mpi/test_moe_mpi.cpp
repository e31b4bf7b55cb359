// Expert-parallel (DPMoE) and PPMoE layers against the single-rank reference with the same
// weights and tokens (000 Sec. 3.3.6: functionally equivalent): outputs, input gradients,
// gate and expert weight gradients, aux loss; top-1, top-2 and prototyping, with and
// without capacity, and M6-T's own gate (one-hot dispatch) against the fused reference, at
// whatever world size mpirun gives (CTest: 1, 2 and 4 ranks). The distributed layers run on
// MOEBENCH_TEST_BACKEND's backend (on cuda over NCCL), the reference on the CPU.
#include <gtest/gtest.h>
#include <mpi.h>
#include "comm/comm.h"
#include "comm/nccl_order.h"
#include "backend_layer.h"
#include "moe_test_util.h"
#include "timeline_util.h"

namespace moebench {
using namespace testing_util;
using test_backend::BackendLayer;

struct Case {
  const char* name;
  int prototypes, k;
  std::optional<double> capacity;
  bool aux;
  GateImpl gate = GateImpl::fused;  // of the distributed layer; the reference's is always fused
};

static const Case kCases[] = {
    {"top1_dropless", 1, 1, std::nullopt, true}, {"top1_capacity", 1, 1, 1.0, true},
    {"top2_dropless", 1, 2, std::nullopt, true}, {"top2_capacity", 1, 2, 1.25, false},
    {"proto2x1_capacity", 2, 1, 1.0, true},      {"proto2x2_dropless", 2, 2, std::nullopt, true},
    {"paper_top2_capacity", 1, 2, 1.0, true, GateImpl::paper},
    {"paper_proto2x2_capacity", 2, 2, 1.25, true, GateImpl::paper},
};

static MoEConfig config_for(const Case& c) {
  MoEConfig cfg = test_moe_config(8, c.prototypes, c.k);
  cfg.capacity_factor = c.capacity;
  cfg.aux_loss = c.aux;
  cfg.aux_coef = 0.1f;
  cfg.gate = c.gate;
  return cfg;
}
static MoEConfig reference_for(const Case& c) {
  MoEConfig cfg = config_for(c);
  cfg.gate = GateImpl::fused;
  return cfg;
}

class MoEDistributed : public test_backend::WorldTest<test_backend::WorldOf::backend> {};

static void expect_close(const float* got, const float* want, std::size_t count, const std::string& what) {
  EXPECT_LT(rel_diff(got, want, count), test_backend::f32_tolerance(2e-5)) << what;
}

TEST_F(MoEDistributed, ExpertParallelEqualsSingleRankReference) {
  const int T = 12;  // tokens per rank
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const MoEConfig cfg = config_for(c);
    BackendLayer ep(cfg, [&](const DispatcherEnv& env) { return make_expert_parallel_dispatcher(env, *world); });
    CpuLayer ref(reference_for(c), [&](const DispatcherEnv& env) { return make_local_dispatcher(env, n); });
    ep.forward(tokens(T, 16, 1, r * T));
    ref.forward(tokens(n * T, 16, 1));
    const std::size_t off = std::size_t(r) * T * 16, cnt = std::size_t(T) * 16;
    expect_close(ep.y.data(), ref.y.data() + off, cnt, "y");
    ep.backward(tokens(T, 16, 2, r * T));
    ref.backward(tokens(n * T, 16, 2));
    expect_close(ep.dx.data(), ref.dx.data() + off, cnt, "dx");
    expect_close(ep.gate_g(), ref.gate_g(), 16 * 8, "gate grad");
    const int L = 8 / n, first = r * L;
    const std::size_t per = ep.expert_weights();
    expect_close(ep.w1_g(), ref.w1_g() + first * per, L * per, "w1 grad");
    expect_close(ep.w2_g(), ref.w2_g() + first * per, L * per, "w2 grad");
    double aux = ep.aux_loss(), aux_sum = 0;
    MPI_Allreduce(&aux, &aux_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_NEAR(aux_sum / n, ref.aux_loss(), 1e-6);
  }
}

TEST_F(MoEDistributed, PpmoeEqualsSingleRankReference) {
  const int T = 20;  // every rank of the tensor-parallel group holds the same tokens
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const MoEConfig cfg = config_for(c);
    BackendLayer pp(cfg, [&](const DispatcherEnv& env) { return make_ppmoe_dispatcher(env, *world); });
    CpuLayer ref(reference_for(c), [&](const DispatcherEnv& env) { return make_local_dispatcher(env, 1); });
    const auto x = tokens(T, 16, 4), dy = tokens(T, 16, 5);
    pp.forward(x);
    ref.forward(x);
    expect_close(pp.y.data(), ref.y.data(), x.size(), "y");
    pp.backward(dy);
    ref.backward(dy);
    expect_close(pp.dx.data(), ref.dx.data(), x.size(), "dx");
    expect_close(pp.gate_g(), ref.gate_g(), 16 * 8, "gate grad");
    const int L = 8 / n, first = r * L;
    const std::size_t per = pp.expert_weights();
    expect_close(pp.w1_g(), ref.w1_g() + first * per, L * per, "w1 grad");
    expect_close(pp.w2_g(), ref.w2_g() + first * per, L * per, "w2 grad");
    EXPECT_NEAR(pp.aux_loss(), ref.aux_loss(), 1e-9);
  }
}

// The gate reads its counts back in one copy per forward, and nothing more (the aux-loss
// statistics stay on the device until asked): the host waits for every copy to the host, so each
// more one is a stall in the middle of the layer.
TEST_F(MoEDistributed, TheGateCopiesToTheHostOncePerForward) {
  if (test_backend::backend() != Backend::cpu) GTEST_SKIP() << test_backend::kReadsCpuTimeline;
  for (const Case& c : {kCases[0], kCases[3], kCases[6]}) {  // with and without the aux loss; M6-T's gate
    SCOPED_TRACE(c.name);
    CpuLayer layer(config_for(c), [&](const DispatcherEnv& env) { return make_expert_parallel_dispatcher(env, *world); });
    const Stream s = layer.dev.create_stream("layer");  // a queued stream: its ops are on the timeline
    const std::vector<float> x = tokens(12, 16, 1, r * 12);
    std::vector<float> y(x.size());
    std::vector<TimelineEntry> all;
    std::size_t group_experts = 0;
    {
      RecordedTimeline timeline(r);
      const MoEContext ctx = layer.layer->forward(x.data(), 12, y.data(), s);
      s.synchronize();
      all = timeline.entries();
      group_experts = ctx.routing.group_experts();
    }
    const auto gating = ranges_named(all, "moe.gating");
    ASSERT_EQ(gating.size(), 1u);
    const auto copies = ops_inside(all, gating[0], "copy to host");
    ASSERT_EQ(copies.size(), 1u) << "copies to the host in the gate's forward";
    // [routed | kept], [groups, experts] each
    EXPECT_EQ(number_arg(copies[0], "bytes"), 4.0 * 2 * double(group_experts));
    forget_communicator_streams();  // each case's stream is drained before the next case's uses `world`
  }
}

// 000 Sec. 3.3.4: PPMoE's backward sums the input gradient (b s h) over the TP group like tensor
// parallelism, and the gate weights' gradient (h x E) besides, which the paper calls negligible.
// Each is one all-reduce in a range of its own (moe.sync.bwd, moe.gate_sync.bwd), their bytes in
// the ratio of the tensors; DPMoE synchronises the gate alone.
TEST_F(MoEDistributed, GateSyncIsTimedApartFromTheInputGradientSync) {
  if (test_backend::backend() != Backend::cpu) GTEST_SKIP() << test_backend::kReadsCpuTimeline;
  if (n < 2) GTEST_SKIP() << "one rank synchronises nothing";
  const int T = 20, h = 16, E = 8;
  for (bool ppmoe : {true, false}) {
    SCOPED_TRACE(ppmoe ? "PPMoE" : "DPMoE");
    CpuLayer layer(config_for(kCases[0]), [&](const DispatcherEnv& env) {
      return ppmoe ? make_ppmoe_dispatcher(env, *world) : make_expert_parallel_dispatcher(env, *world);
    });
    layer.forward(tokens(T, h, 4));
    std::vector<TimelineEntry> all;
    {
      RecordedTimeline timeline(r);
      layer.backward(tokens(T, h, 5));
      all = timeline.entries();
    }
    const auto gate = ranges_named(all, "moe.gate_sync.bwd"), data = ranges_named(all, "moe.sync.bwd");
    ASSERT_EQ(gate.size(), 1u);
    ASSERT_EQ(data.size(), 1u);
    const auto gate_ops = ops_inside(all, gate[0]), data_ops = ops_inside(all, data[0]);
    ASSERT_EQ(gate_ops.size(), 1u) << "the gate weights' sync: one all-reduce";
    EXPECT_EQ(gate_ops[0].name.rfind("all_reduce", 0), 0u) << gate_ops[0].name;
    if (!ppmoe) {
      EXPECT_TRUE(data_ops.empty()) << "DPMoE's ranks hold their own tokens: no input-gradient sum";
      continue;
    }
    ASSERT_EQ(data_ops.size(), 1u);
    EXPECT_EQ(data_ops[0].name.rfind("all_reduce", 0), 0u) << data_ops[0].name;
    EXPECT_DOUBLE_EQ(number_arg(data_ops[0], "bus_bytes") / number_arg(gate_ops[0], "bus_bytes"), double(T * h) / (h * E));
  }
}

// bf16 tokens, experts and exchanges (MPI moves and sums the 16-bit words): the expert-parallel
// and PPMoE layers against the fp32 single-rank layer on the same rounded values.
TEST_F(MoEDistributed, SixteenBitLayersMatchTheFp32Reference) {
  const DType t = DType::bf16;
  const Case c = kCases[3];  // top-2 with capacity
  MoEConfig cfg = config_for(c);
  cfg.dtype = t;
  const int T = 12;
  for (bool ppmoe : {false, true}) {
    SCOPED_TRACE(ppmoe ? "PPMoE" : "expert-parallel");
    BackendLayer layer(cfg, [&](const DispatcherEnv& env) {
      return ppmoe ? make_ppmoe_dispatcher(env, *world) : make_expert_parallel_dispatcher(env, *world);
    });
    const int ref_tokens = ppmoe ? T : n * T, first = ppmoe ? 0 : r * T;
    CpuLayer ref(reference_for(c), [&](const DispatcherEnv& env) { return make_local_dispatcher(env, ppmoe ? 1 : n); });
    const std::size_t per = ref.expert_weights();
    round_to(t, ref.w1(), 8 * per);
    round_to(t, ref.w2(), 8 * per);
    auto x = tokens(ref_tokens, 16, 1), dy = tokens(ref_tokens, 16, 2);
    round_to(t, x.data(), x.size());
    round_to(t, dy.data(), dy.size());
    const std::size_t off = std::size_t(first) * 16, cnt = std::size_t(T) * 16;
    layer.forward(std::vector<float>(x.begin() + off, x.begin() + off + cnt));
    ref.forward(x);
    EXPECT_LT(rel_l2(layer.y.data(), ref.y.data() + off, cnt), 3e-2);
    layer.backward(std::vector<float>(dy.begin() + off, dy.begin() + off + cnt));
    ref.backward(dy);
    EXPECT_LT(rel_l2(layer.dx.data(), ref.dx.data() + off, cnt), 3e-2);
    EXPECT_LT(rel_l2(layer.gate_g(), ref.gate_g(), 16 * 8), 3e-2);
    const int L = 8 / n;
    EXPECT_LT(rel_l2(layer.w1_g(), ref.w1_g() + std::size_t(r) * L * per, L * per), 3e-2);
    EXPECT_LT(rel_l2(layer.w2_g(), ref.w2_g() + std::size_t(r) * L * per, L * per), 3e-2);
  }
}

TEST_F(MoEDistributed, PpmoeInsideTensorParallelSubGroups) {
  if (n != 4) GTEST_SKIP() << "two TP groups of 2 need 4 ranks";
  auto tp = world->split(r / 2, r);
  const MoEConfig cfg = config_for(kCases[2]);
  BackendLayer pp(cfg, [&](const DispatcherEnv& env) { return make_ppmoe_dispatcher(env, *tp); });
  CpuLayer ref(cfg, [&](const DispatcherEnv& env) { return make_local_dispatcher(env, 1); });
  const auto x = tokens(16, 16, 30 + r / 2);  // each TP group has its own tokens
  pp.forward(x);
  ref.forward(x);
  expect_close(pp.y.data(), ref.y.data(), x.size(), "y");
}

}  // namespace moebench
