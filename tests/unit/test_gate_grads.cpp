// The gate's backward from its combine weights' gradients to its logits' in one pass
// (kernels/gate_grads.h, moe/gate.cpp): what the four ops it replaced computed -- the slot
// scatter, the aux loss's group bias, the softmax backward, and on bf16 the split into parts --
// and, in the gate's backward, one op where they were four.
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <vector>
#include "kernels/aux_loss.h"
#include "kernels/axpy.h"
#include "kernels/convert.h"
#include "kernels/gate_grads.h"
#include "kernels/gemm.h"
#include "moe/gate.h"
#include "moe_test_util.h"
#include "timeline_util.h"

namespace moebench {
using namespace testing_util;

namespace {
// The four ops, one after another, as the gate ran them.
std::vector<float> four_ops(const GateGradArgs& a) {
  const GateShape& g = a.g;
  std::vector<float> dprobs(std::size_t(g.tokens) * g.experts, 0.f), dlogits(dprobs.size());
  scatter_slot_grads_cpu(g, a.expert, a.dweight, dprobs.data());
  if (a.density) {
    std::vector<float> bias(std::size_t(a.groups) * g.experts, 0.f);
    axpy_cpu(bias.size(), a.aux_scale, a.density, bias.data());
    add_group_bias_cpu(g.tokens, g.experts, a.groups, bias.data(), dprobs.data());
  }
  softmax_backward_cpu(g, a.probs, dprobs.data(), dlogits.data());
  return dlogits;
}
}  // namespace

TEST(GateGrads, OnePassComputesWhatTheFourOpsComputed) {
  const GateShape g{12, 8, 2, 2};  // two prototypes of four experts, two slots each
  const std::size_t te = std::size_t(g.tokens) * g.experts, ts = std::size_t(g.tokens) * g.slots();
  const std::vector<float> logits = tokens(g.tokens, g.experts, 1), dweight = tokens(g.tokens, g.slots(), 2),
                           density = tokens(3, g.experts, 3);
  std::vector<float> probs(te), weight(ts);
  std::vector<std::int32_t> expert(ts);
  softmax_topk_cpu(g, logits.data(), probs.data(), expert.data(), weight.data());
  for (bool aux : {false, true}) {
    SCOPED_TRACE(aux ? "with the aux loss, three token groups" : "without the aux loss");
    const GateGradArgs a{g, aux ? 3 : 1, expert.data(), dweight.data(), probs.data(), aux ? density.data() : nullptr, 0.25f};
    const std::vector<float> want = four_ops(a);
    std::vector<float> got(te, NAN);
    gate_logit_grads(Exec{}, a, Bf16Parts{}, got.data());
    EXPECT_EQ(got, want);
    std::vector<std::uint16_t> parts(4 * te), want_parts(4 * te);
    gate_logit_grads(Exec{}, a, Bf16Parts{4, {0, 1, 2, 0}}, parts.data());
    split_bf16_cpu(want.data(), g.tokens, g.experts, Bf16Parts{4, {0, 1, 2, 0}}, want_parts.data());
    EXPECT_EQ(parts, want_parts);
  }
  const GateGradArgs a{g, 5, expert.data(), dweight.data(), probs.data()};
  std::vector<float> out(te);
  EXPECT_THROW(gate_logit_grads(Exec{}, a, Bf16Parts{}, out.data()), Error) << "5 groups do not divide 12 tokens";
  const GateGradArgs one{g, 1, expert.data(), dweight.data(), probs.data()};
  EXPECT_THROW(gate_logit_grads(Exec{}, one, Bf16Parts{5, {}}, out.data()), Error);
  EXPECT_THROW(gate_logit_grads(Exec{}, one, Bf16Parts{1, {3}}, out.data()), Error);
}

// In the gate's backward: the one pass, and none of the ops it replaced; the weight's gradient
// is x^T times what the four ops computed, bit for bit (fp32).
TEST(GateGrads, TheGateBackwardIsOnePassInEveryDtype) {
  for (DType t : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(t));
    MoEConfig c;
    c.hidden = 32; c.ffn = 16; c.experts = 8; c.top_k = 2; c.prototypes = 2; c.dtype = t;
    const int T = 24, G = 2;
    Device dev = Device::open(Backend::cpu);
    TrackingAllocator alloc{Backend::cpu};
    Gate gate(c, dev, alloc);
    const Stream s = dev.create_stream("gate");  // queued: its ops are on the timeline
    gate.init(7, s);
    const std::vector<float> x = tokens(T, c.hidden, 8);
    const auto x16 = bits16(DType::bf16, x);
    const void* xt = t == DType::f32 ? static_cast<const void*>(x.data()) : x16.data();
    Routing r = gate.forward(xt, T, G, s);
    s.synchronize();
    const std::vector<float> dweight = tokens(T, c.slots(), 9);
    std::vector<float> grad(std::size_t(c.hidden) * c.experts, NAN);
    std::vector<float> dx32(std::size_t(T) * c.hidden, 0.f);
    const auto dx16 = bits16(DType::bf16, dx32);
    std::vector<std::uint16_t> dx_bf16 = dx16;
    void* dx = t == DType::f32 ? static_cast<void*>(dx32.data()) : dx_bf16.data();
    std::map<std::string, int> ops;
    {
      RecordedTimeline timeline;
      gate.backward(r, xt, dweight.data(), dx, 1.f, grad.data(), s);
      s.synchronize();
      for (const TimelineEntry& e : timeline.entries())
        if (!e.range) ++ops[e.name];
    }
    EXPECT_EQ(ops["gate_logit_grads"], 1);
    for (const char* gone : {"fill zero", "axpy", "scatter_slot_grads", "add_group_bias", "softmax_backward"})
      EXPECT_EQ(ops[gone], 0) << gone;
    EXPECT_EQ(ops["split_bf16"], t == DType::bf16 ? 1 : 0) << "the weight's parts only: dlogits leaves the pass split";
    if (t != DType::f32) continue;
    const std::vector<float> probs(r.probs.as<float>(), r.probs.as<float>() + std::size_t(T) * c.experts);
    const std::vector<std::int32_t> expert(r.expert.as<std::int32_t>(), r.expert.as<std::int32_t>() + std::size_t(T) * c.slots());
    const std::vector<float> density(r.density_dev(), r.density_dev() + std::size_t(G) * c.experts);
    const GateShape g{T, c.experts, c.prototypes, c.top_k};
    // The gate's own aux scale: coef (F/Z) / T_g / G.
    const float scale = float(double(c.aux_coef) * g.per_prototype() / g.prototypes / (double(T) / G) / G);
    const std::vector<float> dlogits = four_ops(GateGradArgs{g, G, expert.data(), dweight.data(), probs.data(), density.data(), scale});
    std::vector<float> want(grad.size());
    gemm(Exec{}, dense_gemm(true, false, c.hidden, c.experts, T, x.data(), dlogits.data(), want.data()));
    EXPECT_EQ(grad, want);
  }
}

}  // namespace moebench
