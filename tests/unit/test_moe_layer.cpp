// The single-rank MoE layer on the CPU: against an independent dense oracle, its backward
// against finite differences, prototyping equivalences, and determinism.
#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <numeric>
#include "kernels/gelu_math.h"
#include "runtime/kernel_log.h"
#include "moe_test_util.h"
#include "timeline_util.h"

namespace moebench {
using namespace testing_util;

// y[t] = sum over each prototype's top-k (softmax inside the prototype) of p * FFN_e(x[t]),
// computed with plain loops and a sort: shares no code with the layer.
static std::vector<float> dense_oracle(CpuLayer& L, const std::vector<float>& x) {
  const MoEConfig& c = L.cfg();
  const int T = int(x.size() / c.hidden), F = c.per_prototype();
  std::vector<float> y(x.size(), 0.f);
  for (int t = 0; t < T; ++t) {
    std::vector<double> logit(c.experts, 0.0);
    for (int e = 0; e < c.experts; ++e)
      for (int i = 0; i < c.hidden; ++i) logit[e] += double(x[t * c.hidden + i]) * L.gate_w()[i * c.experts + e];
    for (int z = 0; z < c.prototypes; ++z) {
      double mx = -1e300, sum = 0;
      for (int f = 0; f < F; ++f) mx = std::max(mx, logit[z * F + f]);
      std::vector<double> p(F);
      for (int f = 0; f < F; ++f) sum += (p[f] = std::exp(logit[z * F + f] - mx));
      std::vector<int> order(F);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
      for (int j = 0; j < c.top_k; ++j) {
        const int e = z * F + order[j];
        const float* w1 = L.w1() + std::size_t(e) * L.expert_weights();
        const float* w2 = L.w2() + std::size_t(e) * L.expert_weights();
        std::vector<double> a(c.ffn, 0.0);
        for (int k = 0; k < c.ffn; ++k) {
          for (int i = 0; i < c.hidden; ++i) a[k] += double(x[t * c.hidden + i]) * w1[i * c.ffn + k];
          a[k] = gelu_math::forward(float(a[k]));
        }
        for (int i = 0; i < c.hidden; ++i) {
          double o = 0;
          for (int k = 0; k < c.ffn; ++k) o += a[k] * w2[k * c.hidden + i];
          y[t * c.hidden + i] += float(p[order[j]] / sum * o);
        }
      }
    }
  }
  return y;
}

TEST(MoELayer, MatchesDenseOracleForTopKAndPrototyping) {
  for (auto [Z, k] : {std::pair{1, 1}, {1, 2}, {1, 4}, {2, 1}, {2, 2}, {4, 1}}) {
    CpuLayer L(test_moe_config(8, Z, k), local_dispatcher);
    const auto x = tokens(20, 16, 3);
    L.forward(x);
    const auto want = dense_oracle(L, x);
    EXPECT_LT(rel_diff(L.y.data(), want.data(), want.size()), 1e-5) << "Z=" << Z << " k=" << k;
  }
}

TEST(MoELayer, OnePrototypeIsPlainTopK) {
  // Z = 1 routes exactly as an independent top-k over all experts (the oracle above), and
  // with Z = k and k' = 1 every token gets exactly one expert from each prototype.
  CpuLayer a(test_moe_config(8, 1, 2), local_dispatcher), b(test_moe_config(8, 4, 1), local_dispatcher);
  const auto x = tokens(32, 16, 5);
  a.forward(x);
  b.forward(x);
  EXPECT_LT(rel_diff(a.y.data(), dense_oracle(a, x).data(), x.size()), 1e-5);
  const auto ex = b.slots(b.routing().expert);
  for (int t = 0; t < 32; ++t)
    for (int z = 0; z < 4; ++z) {
      const int e = ex[t * 4 + z];
      EXPECT_GE(e, 2 * z);
      EXPECT_LT(e, 2 * z + 2);
    }
}

TEST(MoELayer, SameSeedTwiceIsBitwiseIdentical) {
  MoEConfig c = test_moe_config(8, 2, 2);
  c.capacity_factor = 1.0;
  CpuLayer a(c, local_dispatcher, 11), b(c, local_dispatcher, 11);
  const auto x = tokens(24, 16, 9), dy = tokens(24, 16, 10);
  a.forward(x); a.backward(dy);
  b.forward(x); b.backward(dy);
  EXPECT_EQ(0, std::memcmp(a.y.data(), b.y.data(), a.y.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.dx.data(), b.dx.data(), a.dx.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.gate_g(), b.gate_g(), 16 * 8 * 4));
  EXPECT_EQ(0, std::memcmp(a.w1_g(), b.w1_g(), 8 * a.expert_weights() * 4));
}

TEST(MoELayer, CapacityDropsTokensToZeroOutput) {
  MoEConfig c = test_moe_config(4, 1, 1);
  c.capacity_factor = 0.5;  // C = ceil(1 * 16 / 4 * 0.5) = 2 of 4 average
  CpuLayer L(c, local_dispatcher);
  const auto x = tokens(16, 16, 21);
  L.forward(x);
  const auto pos = L.slots(L.routing().position);
  int dropped = 0;
  for (int t = 0; t < 16; ++t) {
    if (pos[t] >= 0) continue;
    ++dropped;
    for (int i = 0; i < 16; ++i) EXPECT_EQ(L.y[t * 16 + i], 0.f);  // the residual carries it
  }
  EXPECT_EQ(dropped, 16 - 8);
  EXPECT_NEAR(L.load().dropped_fraction, 0.5, 1e-12);
}

// Loss = <dy, y> + aux; backward gives its gradient. Central differences on every input
// and parameter, skipping coordinates whose nudge changes the routing (not differentiable).
TEST(MoELayer, BackwardMatchesFiniteDifferences) {
  MoEConfig c;
  c.hidden = 6; c.ffn = 10; c.experts = 4; c.prototypes = 2; c.top_k = 1;
  c.capacity_factor = 1.5;
  c.aux_coef = 0.5f;
  CpuLayer L(c, local_dispatcher, 13);
  auto x = tokens(8, 6, 14);
  const auto dy = tokens(8, 6, 15);
  L.forward(x);
  L.backward(dy);
  const std::vector<float> dx = L.dx;
  const std::vector<float> gw(L.gate_g(), L.gate_g() + 24);
  const std::vector<float> g1(L.w1_g(), L.w1_g() + 4 * 60), g2(L.w2_g(), L.w2_g() + 4 * 60);

  auto loss = [&](std::vector<std::int32_t>* route) {
    L.forward(x);
    if (route) {
      *route = L.slots(L.routing().expert);
      const auto p = L.slots(L.routing().position);
      route->insert(route->end(), p.begin(), p.end());
    }
    double s = L.aux_loss();
    for (std::size_t i = 0; i < dy.size(); ++i) s += double(dy[i]) * L.y[i];
    return s;
  };
  std::vector<std::int32_t> base_route;
  loss(&base_route);
  int checked = 0, skipped = 0;
  auto check = [&](float* v, float analytic, const char* what, int i) {
    const float keep = *v;
    const float h = 1e-2f;
    std::vector<std::int32_t> rp, rm;
    *v = keep + h;
    const double lp = loss(&rp);
    *v = keep - h;
    const double lm = loss(&rm);
    *v = keep;
    if (rp != base_route || rm != base_route) { ++skipped; return; }
    ++checked;
    const double numeric = (lp - lm) / (2.0 * h);
    EXPECT_NEAR(analytic, numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << what << "[" << i << "]";
  };
  for (int i = 0; i < 48; ++i) check(&x[i], dx[i], "dx", i);
  for (int i = 0; i < 24; ++i) check(L.gate_w() + i, gw[i], "dWg", i);
  for (int i = 0; i < 240; ++i) check(L.w1() + i, g1[i], "dW1", i);
  for (int i = 0; i < 240; ++i) check(L.w2() + i, g2[i], "dW2", i);
  EXPECT_GT(checked, 500) << "skipped " << skipped;
}

// With the gate weight set to the identity (h = E), the tokens are the logits: a fixed routing
// whose aux loss and load statistics are worked out by hand.
TEST(MoELayer, AuxLossAndLoadStatisticsOnAFixedRouting) {
  MoEConfig c;
  c.hidden = 2; c.ffn = 4; c.experts = 2; c.top_k = 1;
  c.aux_coef = 1.f;
  CpuLayer L(c, local_dispatcher);
  const float eye[4] = {1, 0, 0, 1};
  std::copy(eye, eye + 4, L.gate_w());
  // logits (ln 3, 0) -> probs (0.75, 0.25); (0, ln 1.5) -> (0.4, 0.6); (ln 3, 0) again
  const float l3 = std::log(3.f), l15 = std::log(1.5f);
  L.forward({l3, 0.f, 0.f, l15, l3, 0.f});
  // density (2/3, 1/3), proxy ((0.75 + 0.4 + 0.75) / 3, (0.25 + 0.6 + 0.25) / 3)
  const double want = 1.0 * 2 * (2.0 / 3 * 1.9 / 3 + 1.0 / 3 * 1.1 / 3);
  EXPECT_NEAR(L.aux_loss(), want, 1e-6);
  const LoadStats s = L.load();
  EXPECT_EQ(s.kept, (std::vector<double>{2, 1}));
  EXPECT_NEAR(s.cv, (0.5 / 1.5), 1e-12);  // mean 1.5, sigma 0.5
  EXPECT_EQ(s.dropped_fraction, 0.0);
}

// The forward's one copy to the host holds the counts alone and is queued before the aux
// statistics, so that the host waits for the counts, not for them; the aux loss comes to the host
// when asked, in one more copy, and until then reading it throws.
// The fused gate's aux statistics come out of its routing op, before the counts' copy (on CUDA in the
// routing kernel's otherwise idle blocks); the paper gate queues them after the copy, so that the
// host waits for the counts alone. Either way one copy a forward, and the aux loss's own only when
// it is asked for.
TEST(MoELayer, TheForwardCopiesTheCountsOnceAndTheAuxLossWhenAsked) {
  for (auto [aux, gate] : {std::pair{true, GateImpl::fused}, std::pair{false, GateImpl::fused},
                           std::pair{true, GateImpl::paper}}) {
    SCOPED_TRACE(std::string(aux ? "aux loss on, " : "aux loss off, ") + gate_impl_name(gate) + " gate");
    MoEConfig c = test_moe_config(4, 1, 2);
    c.aux_loss = aux;
    c.gate = gate;
    if (gate == GateImpl::paper) c.capacity_factor = 2.0;
    CpuLayer L(c, local_dispatcher);
    const auto x = tokens(12, c.hidden, 3);
    ASSERT_EQ(KernelLog::start(Backend::cpu), "");
    L.forward(x);
    const std::vector<KernelRecord> forward = KernelLog::stop();
    std::vector<std::string> names;
    for (const KernelRecord& r : forward) names.push_back(r.name);
    const auto at = [&](const char* name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
    EXPECT_EQ(std::count(names.begin(), names.end(), "copy to host"), 1) << "one copy to the host a forward";
    const bool paper = gate == GateImpl::paper;
    EXPECT_EQ(at("aux_loss_stats") < std::ptrdiff_t(names.size()), aux && paper) << "the fused gate's are its routing's";
    if (aux && paper) {
      EXPECT_LT(at("copy to host"), at("aux_loss_stats")) << "the host would wait for the aux statistics";
    }
    if (!paper) {
      EXPECT_LT(at("route_tokens"), at("copy to host"));
    }
    EXPECT_TRUE(L.routing().counts_on_host);
    EXPECT_EQ(L.load().kept.size(), std::size_t(c.experts));
    if (aux) {
      EXPECT_THROW(L.routing().aux_loss(), Error);
    } else {
      EXPECT_EQ(L.routing().aux_loss(), 0.0) << "with the aux loss off there is nothing more to read";
    }
    ASSERT_EQ(KernelLog::start(Backend::cpu), "");
    const double loss = L.aux_loss();
    L.aux_loss();  // read once
    const std::vector<KernelRecord> read = KernelLog::stop();
    EXPECT_EQ(read.size(), aux ? 1u : 0u) << "the aux statistics in one copy, once";
    if (aux) {
      EXPECT_GT(loss, 0.0);
      EXPECT_EQ(L.routing().density.size(), std::size_t(c.experts));
    } else {
      EXPECT_EQ(loss, 0.0);
    }
  }
}

TEST(MoEConfig, BadInputNamesTheOption) {
  auto err = [](MoEConfig c, int tokens, int ranks) { return c.validate(tokens, ranks).value_or(""); };
  MoEConfig c = test_moe_config(8, 1, 1);
  EXPECT_EQ(err(c, 16, 2), "");
  EXPECT_NE(err(c, 16, 3).find("--experts"), std::string::npos);
  EXPECT_NE(err(test_moe_config(8, 3, 1), 16, 1).find("--prototypes"), std::string::npos);
  EXPECT_NE(err(test_moe_config(8, 2, 5), 16, 1).find("--top-k"), std::string::npos);
  EXPECT_NE(err(c, 0, 1).find("--tokens"), std::string::npos);
  c.capacity_factor = 0.0;
  EXPECT_NE(err(c, 16, 1).find("--capacity-factor"), std::string::npos);
  c.capacity_factor = -1.0;
  EXPECT_NE(err(c, 16, 1).find("--capacity-factor"), std::string::npos);
}

// --gate-kernels chooses between the fused gate's CUDA kernels: refused on the CPU, which routes in
// an op of its own, and with the paper gate, which routes by rounds of arg-max; the rows name what ran.
TEST(MoEConfig, GateKernelsAreTheFusedGatesCudaChoice) {
  MoEConfig c = test_moe_config(8, 1, 1);
  EXPECT_EQ(c.gate_kernels_name(Backend::cpu), "cpu_op");
  c.gate_kernels = RouteKernels::separate;
  EXPECT_FALSE(c.validate(16, 1));
  const auto cpu = c.validate_for(Backend::cpu);
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->rfind("--gate-kernels: a choice between the gate's CUDA kernels; the cpu backend", 0), 0u) << *cpu;
  c.gate = GateImpl::paper;
  c.capacity_factor = 1.0;
  const auto paper = c.validate(16, 1);
  ASSERT_TRUE(paper);
  EXPECT_EQ(paper->rfind("--gate-kernels: the paper gate routes by rounds of arg-max", 0), 0u) << *paper;
  EXPECT_EQ(c.gate_kernels_name(Backend::cpu), "arg_max_rounds");
  EXPECT_EQ(parse_route_kernels("one_pass"), RouteKernels::one_pass);
  EXPECT_EQ(parse_route_kernels("separate"), RouteKernels::separate);
  EXPECT_FALSE(parse_route_kernels("fused"));
}

// 16-bit grouped experts on the GPU need rows of a multiple of 8 elements (cuBLAS reads
// 16-byte aligned pointers); the CPU and fp32 have no such limit.
TEST(MoEConfig, GroupedSixteenBitOnTheGpuNeedsAlignedWidths) {
  MoEConfig c = test_moe_config(8, 1, 1);  // h 16, f 24
  c.hidden = 100;
  c.dtype = DType::f16;
  EXPECT_FALSE(c.validate_for(Backend::cpu));
  const auto e = c.validate_for(Backend::cuda);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rfind("--hidden: 100 is not a multiple of 8", 0), 0u) << *e;
  c.hidden = 96;
  c.ffn = 36;
  ASSERT_TRUE(c.validate_for(Backend::cuda));
  EXPECT_EQ(c.validate_for(Backend::cuda)->rfind("--ffn", 0), 0u);
  c.expert_gemm = ExpertGemm::serial;
  EXPECT_FALSE(c.validate_for(Backend::cuda));
  c.expert_gemm = ExpertGemm::grouped;
  c.dtype = DType::f32;
  EXPECT_FALSE(c.validate_for(Backend::cuda));
}

// Timing the expert GEMMs alone must leave the layer as its last forward + backward left it:
// the dumped weight gradients were once the GEMM-only timing's stand-in products.
TEST(Experts, GemmsOnlyLeavesTheLayersStateUntouched) {
  MoEConfig c = test_moe_config(4, 1, 2);
  CpuLayer L(c, local_dispatcher);
  L.forward(tokens(24, c.hidden, 3));
  L.backward(tokens(24, c.hidden, 4));
  const std::size_t n = 4 * L.expert_weights();
  const std::vector<float> g1(L.w1_g(), L.w1_g() + n), g2(L.w2_g(), L.w2_g() + n);
  const std::vector<float> w1(L.w1(), L.w1() + n), dx = L.dx;
  TrackingAllocator scratch(Backend::cpu);
  const std::size_t layer_peak = L.alloc.peak_total();
  L.layer->experts().gemms_only(L.ctx->experts, scratch, L.dev.default_stream());
  EXPECT_EQ(std::vector<float>(L.w1_g(), L.w1_g() + n), g1);
  EXPECT_EQ(std::vector<float>(L.w2_g(), L.w2_g() + n), g2);
  EXPECT_EQ(std::vector<float>(L.w1(), L.w1() + n), w1);
  EXPECT_GT(scratch.peak_total(), 0u);               // its outputs went to the scratch allocator
  EXPECT_EQ(L.alloc.peak_total(), layer_peak);       // and not into the layer's peaks
  L.backward(tokens(24, c.hidden, 4));               // backward still sees the forward's activations
  EXPECT_EQ(L.dx, dx);
  EXPECT_EQ(std::vector<float>(L.w1_g(), L.w1_g() + n), g1);
}

// Without the kept GeLU output (MPMoE's one-tensor T_M) the layer computes the same thing, and
// holds one [rows, f] activation less between forward and backward.
TEST(Experts, RecomputingTheActivationInBackwardChangesNothingButMemory) {
  MoEConfig c = test_moe_config(4, 1, 2);
  CpuLayer kept(c, local_dispatcher);
  c.keep_expert_activation = false;
  CpuLayer recomputed(c, local_dispatcher);
  const auto x = tokens(24, c.hidden, 3), dy = tokens(24, c.hidden, 4);
  kept.forward(x);
  recomputed.forward(x);
  const std::size_t rows = kept.ctx->experts.total_rows();
  EXPECT_EQ(kept.alloc.current(MemTag::activations) - recomputed.alloc.current(MemTag::activations), rows * c.ffn * 4);
  EXPECT_FALSE(recomputed.ctx->experts.a);
  kept.backward(dy);
  recomputed.backward(dy);
  EXPECT_EQ(recomputed.y, kept.y);
  EXPECT_EQ(recomputed.dx, kept.dx);
  const std::size_t n = 4 * kept.expert_weights();
  EXPECT_EQ(std::vector<float>(recomputed.w1_g(), recomputed.w1_g() + n), std::vector<float>(kept.w1_g(), kept.w1_g() + n));
  EXPECT_EQ(std::vector<float>(recomputed.w2_g(), recomputed.w2_g() + n), std::vector<float>(kept.w2_g(), kept.w2_g() + n));
}

// The first backward after zero_grad() writes the weight gradients (beta 0; nothing is cleared
// on the device before): stale values -- NaN here -- do not leak in. Later backwards add (beta 1).
TEST(Experts, FirstBackwardAfterZeroGradOverwritesTheWeightGradients) {
  MoEConfig c = test_moe_config(4, 1, 2);
  CpuLayer L(c, local_dispatcher);
  L.forward(tokens(24, c.hidden, 3));
  Experts& experts = L.layer->experts();
  const ExpertsContext& ctx = L.ctx->experts;
  const std::size_t n = 4 * L.expert_weights(), R = ctx.total_rows();
  const auto dy = tokens(int(R), c.hidden, 5);
  std::vector<float> dx(R * c.hidden);
  experts.zero_grad(L.dev.default_stream());
  experts.backward(ctx, dy.data(), dx.data(), L.dev.default_stream());
  const std::vector<float> g1(L.w1_g(), L.w1_g() + n), g2(L.w2_g(), L.w2_g() + n);
  std::fill(L.w1_g(), L.w1_g() + n, NAN);
  std::fill(L.w2_g(), L.w2_g() + n, NAN);
  const auto inside = [](std::uintptr_t p, const Buffer& b) {
    const auto first = reinterpret_cast<std::uintptr_t>(b.data());
    return p >= first && p < first + b.bytes();
  };
  const Stream s = L.dev.create_stream("experts");  // queued: its ops are on the timeline
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "after zero_grad" : "accumulating");
    std::vector<TimelineEntry> all;
    {
      RecordedTimeline timeline;
      if (pass == 0) experts.zero_grad(s);
      experts.backward(ctx, dy.data(), dx.data(), s);
      s.synchronize();
      all = timeline.entries();
    }
    int weight_gemms = 0;
    for (const TimelineEntry& e : all) {
      EXPECT_NE(e.name, "fill zero");
      const std::uintptr_t out = pointer_arg(e, "c");
      if (e.range || e.name != "gemm" || !(inside(out, experts.w1_grad()) || inside(out, experts.w2_grad()))) continue;
      ++weight_gemms;
      EXPECT_EQ(number_arg(e, "beta"), pass == 0 ? 0.0 : 1.0);
    }
    EXPECT_EQ(weight_gemms, 2 * 4);  // dW1 and dW2 of every expert, an empty one's included
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(L.w1_g()[i], (pass + 1) * g1[i], 1e-6 * (1 + std::fabs(g1[i]))) << i;
      ASSERT_NEAR(L.w2_g()[i], (pass + 1) * g2[i], 1e-6 * (1 + std::fabs(g2[i]))) << i;
    }
  }
}

}  // namespace moebench
