// The gate's routing as one op (kernels/routing.h): the one-pass cooperative kernel and the
// kernels it replaced, each against the CPU's references, the aux statistics among them -- the paper's layers, prototypes, token
// groups with dropping, ragged rows, rows of eight registers a lane, more rows than the grid has
// warps; replayed from a graph, as the GPT step replays its gates; and the bf16 gate's forward logs
// the one kernel. Skipped where there is no GPU.
#include <set>
#include <string>
#include <vector>
#include "gpu/gpu_test_util.h"
#include "kernels/aux_loss.h"
#include "kernels/bf16_split.h"
#include "kernels/gating.h"
#include "kernels/routing.h"
#include "moe/gate.h"
#include "runtime/kernel_log.h"
#include "runtime/stream_graph.h"

namespace moebench {
using namespace gputest;

TEST(GpuRouting, OnePassAndSeparateKernelsMatchTheCpu) {
  MOEBENCH_REQUIRE_GPU(dev);
  if (dev.backend() != Backend::cuda) GTEST_SKIP() << "the choice of kernels is CUDA's";
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  EXPECT_EQ(route_tokens_kernels_cuda(GateShape{8192, 64, 1, 1}), RouteKernels::one_pass);
  EXPECT_EQ(route_tokens_kernels_cuda(GateShape{19, 257, 1, 8}), RouteKernels::separate) << "a block a row";
  struct Case {
    CapacityShape c;
    bool slices;
  };
  for (const Case& k : {Case{{GateShape{8192, 64, 1, 1}, 1, -1}, true}, Case{{GateShape{8192, 8, 1, 2}, 1, -1}, true},
                        Case{{GateShape{256, 32, 2, 2}, 4, 3}, false}, Case{{GateShape{33, 20, 1, 3}, 1, 40}, false},
                        Case{{GateShape{4097, 256, 4, 4}, 1, -1}, true}, Case{{GateShape{19, 256, 1, 8}, 1, -1}, false},
                        Case{{GateShape{200003, 16, 1, 1}, 1, 7}, false}}) {
    const GateShape& g = k.c.gate;
    const std::size_t te = std::size_t(g.tokens) * g.experts, ts = std::size_t(g.tokens) * g.slots(),
                      ge = std::size_t(k.c.groups) * g.experts;
    const auto input = random_rounded(k.slices ? 3 * te : te, DType::f32, 7, 2.f);
    std::vector<float> logits(te), probs(te), weight(ts);
    std::vector<std::int32_t> expert(ts), position(ts), routed(ge), kept(ge);
    std::vector<float> density(ge), proxy(ge);
    if (k.slices)
      sum_split3_cpu(input.data(), std::size_t(g.tokens), g.experts, logits.data());
    else
      logits = input;
    softmax_topk_cpu(g, logits.data(), probs.data(), expert.data(), weight.data());
    assign_positions_cpu(k.c, expert.data(), position.data(), routed.data(), kept.data());
    aux_loss_stats_cpu(g, k.c.groups, probs.data(), expert.data(), density.data(), proxy.data());
    for (RouteKernels kernels : {RouteKernels::one_pass, RouteKernels::separate}) {
      const std::string what = std::string(kernels == RouteKernels::one_pass ? "one pass" : "separate") +
                               " T=" + std::to_string(g.tokens) + " E=" + std::to_string(g.experts) +
                               " Z=" + std::to_string(g.prototypes) + " k=" + std::to_string(g.k) +
                               " G=" + std::to_string(k.c.groups) + " C=" + std::to_string(k.c.capacity);
      const Exec ex = dev.exec(dev.default_stream());
      Buffer in = to_device(dev, alloc, input), dl = to_device(dev, alloc, std::vector<float>(te, NAN));
      Buffer dp = alloc.allocate(te * 4, MemTag::temporary), de = alloc.allocate(ts * 4, MemTag::temporary),
             dw = alloc.allocate(ts * 4, MemTag::temporary), dpos = alloc.allocate(ts * 4, MemTag::temporary),
             dr = alloc.allocate(ge * 4, MemTag::temporary), dk = alloc.allocate(ge * 4, MemTag::temporary),
             dd = alloc.allocate(ge * 4, MemTag::temporary), dq = alloc.allocate(ge * 4, MemTag::temporary);
      Buffer ws = alloc.allocate(std::max<std::size_t>(route_tokens_workspace_bytes(ex, k.c, true), 1), MemTag::buffers);
      RouteArgs a{k.c, k.slices ? in.as<float>() : nullptr, k.slices ? dl.as<float>() : in.as<float>(), dp.as<float>(),
                  de.as<std::int32_t>(), dw.as<float>(), dpos.as<std::int32_t>(), dr.as<std::int32_t>(),
                  dk.as<std::int32_t>(), dd.as<float>(), dq.as<float>(), ws.data(), ws.bytes()};
      route_tokens(ex, a, kernels);
      if (k.slices) {
        EXPECT_EQ(to_host<float>(dev, dl, te), logits) << what;
      }
      EXPECT_LT(rel_l2(to_host<float>(dev, dp, te), probs), 1e-5) << what;
      EXPECT_EQ(to_host<std::int32_t>(dev, de, ts), expert) << what;
      EXPECT_LT(rel_l2(to_host<float>(dev, dw, ts), weight), 1e-5) << what;
      EXPECT_EQ(to_host<std::int32_t>(dev, dpos, ts), position) << what;
      EXPECT_EQ(to_host<std::int32_t>(dev, dr, ge), routed) << what;
      EXPECT_EQ(to_host<std::int32_t>(dev, dk, ge), kept) << what;
      EXPECT_EQ(to_host<float>(dev, dd, ge), density) << what << ": a count is exact in any order";
      EXPECT_LT(rel_l2(to_host<float>(dev, dq, ge), proxy), 1e-5) << what;
    }
  }
}

// The one-pass kernel captured into a graph (its cooperative launch a node of it) and replayed.
TEST(GpuRouting, TheOnePassKernelReplaysFromAGraph) {
  MOEBENCH_REQUIRE_GPU(dev);
  if (dev.backend() != Backend::cuda) GTEST_SKIP() << "a CUDA graph";
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const CapacityShape c{GateShape{8192, 64, 1, 1}, 1, -1};
  const GateShape& g = c.gate;
  const std::size_t te = std::size_t(g.tokens) * g.experts, ts = std::size_t(g.tokens) * g.slots(), ge = g.experts;
  const auto logits = random_rounded(te, DType::f32, 9, 2.f);
  std::vector<float> probs(te), weight(ts);
  std::vector<std::int32_t> expert(ts), position(ts), routed(ge), kept(ge);
  softmax_topk_cpu(g, logits.data(), probs.data(), expert.data(), weight.data());
  assign_positions_cpu(c, expert.data(), position.data(), routed.data(), kept.data());
  const Stream s = dev.create_stream("graph");
  const Exec ex = dev.exec(s);
  Buffer dl = to_device(dev, alloc, logits), dp = alloc.allocate(te * 4, MemTag::temporary),
         de = alloc.allocate(ts * 4, MemTag::temporary), dw = alloc.allocate(ts * 4, MemTag::temporary),
         dpos = alloc.allocate(ts * 4, MemTag::temporary), dr = alloc.allocate(ge * 4, MemTag::temporary),
         dk = alloc.allocate(ge * 4, MemTag::temporary);
  Buffer ws = alloc.allocate(assign_positions_workspace_bytes(ex, c), MemTag::buffers);
  dev.synchronize();
  const RouteArgs a{c, nullptr, dl.as<float>(), dp.as<float>(), de.as<std::int32_t>(), dw.as<float>(),
                    dpos.as<std::int32_t>(), dr.as<std::int32_t>(), dk.as<std::int32_t>(), nullptr, nullptr,
                    ws.data(), ws.bytes()};
  StreamGraph graph(alloc, s, [&] { route_tokens(ex, a, RouteKernels::one_pass); });
  graph.replay(s);
  s.synchronize();
  EXPECT_EQ(to_host<std::int32_t>(dev, de, ts), expert);
  EXPECT_EQ(to_host<std::int32_t>(dev, dpos, ts), position);
  EXPECT_EQ(to_host<std::int32_t>(dev, dr, ge), routed);
  EXPECT_EQ(to_host<std::int32_t>(dev, dk, ge), kept);
  EXPECT_LT(rel_l2(to_host<float>(dev, dp, te), probs), 1e-5);
}

// The bf16 gate at the paper's 64 experts, its aux loss on, routes in one kernel: none of the five it
// replaced run (the aux statistics' among them). --gate-kernels separate runs those five and not it.
TEST(GpuRouting, TheGatesForwardRunsOneRoutingKernel) {
  MOEBENCH_REQUIRE_GPU(dev);
  if (dev.backend() != Backend::cuda) GTEST_SKIP() << "CUDA's kernels";
  MoEConfig c;
  c.hidden = 256;
  c.ffn = 64;
  c.experts = 64;
  c.top_k = 1;
  c.dtype = DType::bf16;
  c.aux_loss = true;
  const int T = 1024;
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const Stream s = dev.create_stream("gate");
  Buffer x = upload(dev, alloc, random_rounded(std::size_t(T) * c.hidden, DType::bf16, 4), DType::bf16);
  EXPECT_EQ(c.gate_kernels_name(Backend::cuda), "one_pass");
  for (const std::optional<RouteKernels> chosen : {std::optional<RouteKernels>{}, std::optional{RouteKernels::separate}}) {
    c.gate_kernels = chosen;
    const std::string what = c.gate_kernels_name(Backend::cuda);
    Gate gate(c, dev, alloc);
    gate.init(3, s);
    gate.forward(x.data(), T, 1, s);  // warm: the cooperative fit is asked once
    dev.synchronize();
    if (const std::string why = KernelLog::start(dev.backend()); !why.empty()) GTEST_SKIP() << "no kernel log here: " << why;
    Routing r = gate.forward(x.data(), T, 1, s);
    dev.synchronize();
    int route = 0;
    std::set<std::string> apart;
    for (const KernelRecord& k : KernelLog::stop()) {
      route += k.name.find("route_tokens_kernel") != std::string::npos;
      for (const char* old : {"softmax_topk", "tile_histogram", "tile_offsets", "tile_positions", "aux_loss_stats"})
        if (k.name.find(old) != std::string::npos) apart.insert(old);
    }
    EXPECT_EQ(route, chosen ? 0 : 1) << what;
    EXPECT_EQ(apart.size(), chosen ? 5u : 0u) << what;
    EXPECT_EQ(int(r.routed.size()), c.experts);
  }
  // One pass where it cannot run is refused, naming the option.
  c.gate_kernels = RouteKernels::one_pass;
  EXPECT_FALSE(c.validate_for(Backend::cuda));
  c.experts = 512;
  const auto e = c.validate_for(Backend::cuda);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rfind("--gate-kernels one_pass:", 0), 0u) << *e;
  EXPECT_EQ(c.gate_kernels_name(Backend::cuda), "one_pass") << "what was asked for is what the rows name";
  c.gate_kernels.reset();
  EXPECT_EQ(c.gate_kernels_name(Backend::cuda), "separate") << "512 experts a prototype: a block a row";
}

}  // namespace moebench
