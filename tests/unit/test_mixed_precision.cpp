// Mixed precision on the CPU backend: fp16 / bf16 values as the bits both backends store,
// conversions, AdamW on 16-bit weights with fp32 masters, and DataParallelAdam keeping those
// masters across steps so updates below the 16-bit spacing add up (000 Sec. 4.1).
#include <gtest/gtest.h>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>
#include "kernels/adam.h"
#include "kernels/axpy.h"
#include "kernels/causal_softmax.h"
#include "kernels/convert.h"
#include "kernels/cross_entropy.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "kernels/permute.h"
#include "moe_test_util.h"
#include "gpt/data_parallel.h"
#include "timeline_util.h"
#include "runtime/adamw.h"
#include "gpt/gpt_model.h"

namespace moebench {
namespace {

TEST(Bits16, KnownPatternsBothWays) {
  struct Case {
    float v;
    std::uint16_t f16, bf16;
  };
  for (const Case& c : {Case{1.f, 0x3C00, 0x3F80}, Case{-2.f, 0xC000, 0xC000}, Case{0.f, 0x0000, 0x0000},
                        Case{-0.f, 0x8000, 0x8000}, Case{448.f, 0x5F00, 0x43E0}, Case{0.5f, 0x3800, 0x3F00}}) {
    EXPECT_EQ(to_bits16(DType::f16, c.v), c.f16) << c.v;
    EXPECT_EQ(from_bits16(DType::f16, c.f16), c.v) << c.v;
    EXPECT_EQ(to_bits16(DType::bf16, c.v), c.bf16) << c.v;
    EXPECT_EQ(from_bits16(DType::bf16, c.bf16), c.v) << c.v;
  }
  EXPECT_EQ(to_bits16(DType::f16, 65504.f), 0x7BFF);                // the largest finite
  EXPECT_EQ(to_bits16(DType::f16, std::ldexp(1.f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(to_bits16(DType::f16, std::ldexp(1.f, -14)), 0x0400);  // the smallest normal
  EXPECT_EQ(to_bits16(DType::f16, 1e6f), 0x7C00);                   // overflow: infinity
  EXPECT_TRUE(std::isnan(from_bits16(DType::f16, to_bits16(DType::f16, NAN))));
  EXPECT_TRUE(std::isnan(from_bits16(DType::bf16, to_bits16(DType::bf16, NAN))));
  EXPECT_THROW(to_bits16(DType::f32, 1.f), Error);
}

TEST(Bits16, RoundTripIsRoundToNearestEven) {
  for (DType t : {DType::f16, DType::bf16})
    for (int i = -4000; i <= 4000; ++i) {
      const float v = std::ldexp(float(i) * 1.37f + 0.113f, i % 23 - 11);
      EXPECT_EQ(from_bits16(t, to_bits16(t, v)), round_to(t, v)) << dtype_name(t) << " " << v;
    }
}

TEST(Convert, CpuWidensAndNarrowsInStreamOrder) {
  const std::vector<float> x = {1.f, -0.333f, 1e-5f, 3000.7f, -65519.f};
  for (DType t : {DType::f16, DType::bf16}) {
    std::vector<std::uint16_t> h(x.size());
    std::vector<float> back(x.size());
    convert(Exec{}, x.data(), DType::f32, h.data(), t, x.size());
    convert(Exec{}, h.data(), t, back.data(), DType::f32, x.size());
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(back[i], round_to(t, x[i])) << dtype_name(t) << " " << x[i];
  }
  std::vector<float> y(1);
  const std::int32_t i = 3;
  EXPECT_THROW(convert(Exec{}, &i, DType::i32, y.data(), DType::f32, 1), Error);
}

// Values already rounded to t, their bits, and back.
std::vector<float> rounded(DType t, std::size_t n, float scale, int seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = round_to(t, scale * std::sin(0.7f * float(i) + float(seed)));
  return v;
}
std::vector<std::uint16_t> bits(DType t, const std::vector<float>& v) { return testing_util::bits16(t, v); }
std::vector<float> values(DType t, const std::vector<std::uint16_t>& b) { return testing_util::widen16(t, b.data(), b.size()); }
std::vector<float> rounded(DType t, std::vector<float> v) {
  round_to(t, v.data(), v.size());
  return v;
}

// The CPU's 16-bit kernels compute as the fp32 reference on the stored (rounded) inputs and
// store its result rounded: equal bit for bit.
TEST(SixteenBitOnTheCpu, KernelsAreTheFp32ReferenceOnRoundedValues) {
  for (DType t : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    // GEMM into one column block of a wider C, with beta = 1: the other columns stay as they were.
    const int m = 3, n = 2, k = 4, ldc = 5;
    const auto a = rounded(t, m * k, 1.f, 1), b = rounded(t, k * n, 1.f, 2), c0 = rounded(t, m * ldc, 1.f, 3);
    auto c = bits(t, c0);
    auto want = c0;
    gemm_cpu(GemmArgs{false, false, m, n, k, 1.f, 1.f, a.data(), k, b.data(), n, want.data() + 1, ldc, DType::f32, {}});
    const auto a16 = bits(t, a), b16 = bits(t, b);
    gemm(Exec{}, GemmArgs{false, false, m, n, k, 1.f, 1.f, a16.data(), k, b16.data(), n, c.data() + 1, ldc, t, {}});
    EXPECT_EQ(values(t, c), rounded(t, want));
    // GeLU forward and backward (in place), LayerNorm, the causal softmax, cross-entropy, axpy.
    const std::size_t len = 24;
    const auto x = rounded(t, len, 2.f, 4), dy = rounded(t, len, 1.f, 5);
    auto x16 = bits(t, x), y16 = bits(t, std::vector<float>(len)), dy16 = bits(t, dy);
    std::vector<float> y(len), dx(len);
    gelu_forward(Exec{}, x16.data(), y16.data(), len, t);
    gelu_forward_cpu(x.data(), y.data(), len);
    EXPECT_EQ(values(t, y16), rounded(t, y));
    gelu_backward(Exec{}, x16.data(), dy16.data(), dy16.data(), len, t);
    gelu_backward_cpu(x.data(), dy.data(), dx.data(), len);
    EXPECT_EQ(values(t, dy16), rounded(t, dx));
    const std::vector<float> gamma(6, 1.5f), beta(6, 0.25f);
    std::vector<float> mean(4), rstd(4), mean_ref(4), rstd_ref(4);
    layernorm_forward(Exec{}, {4, 6}, x16.data(), gamma.data(), beta.data(), y16.data(), mean.data(), rstd.data(), t);
    layernorm_forward_cpu({4, 6}, x.data(), gamma.data(), beta.data(), y.data(), mean_ref.data(), rstd_ref.data());
    EXPECT_EQ(values(t, y16), rounded(t, y));
    EXPECT_EQ(mean, mean_ref);  // fp32 statistics
    causal_softmax_forward(Exec{}, {1, 4, 0.5f}, x16.data(), y16.data(), t);
    std::vector<float> p(16);
    causal_softmax_forward_cpu({1, 4, 0.5f}, x.data(), p.data());
    const auto probs = values(t, y16);
    EXPECT_EQ(std::vector<float>(probs.begin(), probs.begin() + 16), rounded(t, p));
    const std::vector<std::int32_t> targets = {1, 5, 0};
    std::vector<float> losses(3), losses_ref(3), dlogits(len);
    cross_entropy(Exec{}, {3, 8, 0.5f}, x16.data(), targets.data(), losses.data(), y16.data(), t);
    cross_entropy_cpu({3, 8, 0.5f}, x.data(), targets.data(), losses_ref.data(), dlogits.data());
    EXPECT_EQ(losses, losses_ref);
    EXPECT_EQ(values(t, y16), rounded(t, dlogits));
    auto acc16 = bits(t, dy);
    auto acc = dy;
    axpy(Exec{}, len, -0.5f, x16.data(), acc16.data(), t);
    axpy_cpu(len, -0.5f, x.data(), acc.data());
    EXPECT_EQ(values(t, acc16), rounded(t, acc));
    // Rows to expert order and back: row 2 is mapped by no slot and keeps its value.
    const std::vector<std::int32_t> row_of = {1, 0, 3};
    const RowMap map{3, 1, 8, row_of.data()};
    auto rows16 = bits(t, std::vector<float>(32, 7.f));
    std::vector<float> rows(32, 7.f), out(len);
    dispatch_rows(Exec{}, map, x16.data(), rows16.data(), t);
    dispatch_rows_cpu(map, x.data(), rows.data());
    EXPECT_EQ(values(t, rows16), rounded(t, rows));
    const std::vector<float> weight = {0.5f, 2.f, -1.f};
    combine_rows(Exec{}, map, rows16.data(), weight.data(), y16.data(), t);
    combine_rows_cpu(map, rows.data(), weight.data(), out.data());
    EXPECT_EQ(values(t, y16), rounded(t, out));
  }
}

// The MoE layer on 16-bit data (gate in fp32 on the widened tokens, experts, permutations in
// the 16-bit type) against the fp32 layer on the same rounded tokens and expert weights: the
// same routing, outputs and gradients within the type's rounding.
TEST(SixteenBitOnTheCpu, MoELayerMatchesTheFp32LayerOnRoundedValues) {
  using namespace testing_util;
  for (DType t : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    MoEConfig c = multi_rank_test_config();
    c.dtype = t;
    MoEConfig c32 = c;
    c32.dtype = DType::f32;
    const int T = 40;
    auto x = tokens(T, c.hidden, 1), dy = tokens(T, c.hidden, 2);
    round_to(t, x.data(), x.size());
    round_to(t, dy.data(), dy.size());
    CpuLayer16 layer(c, [](const DispatcherEnv& env) { return make_local_dispatcher(env, 2); });
    CpuLayer ref(c32, [](const DispatcherEnv& env) { return make_local_dispatcher(env, 2); });
    const std::size_t wn = layer.expert_values();
    round_to(t, ref.w1(), wn);  // the weights the 16-bit layer holds
    round_to(t, ref.w2(), wn);
    layer.forward(x);
    ref.forward(x);
    EXPECT_EQ(layer.ctx->routing.kept, ref.routing().kept);
    const std::size_t slots = std::size_t(T) * c.slots();
    EXPECT_EQ(std::vector<std::int32_t>(layer.ctx->routing.expert.as<std::int32_t>(),
                                        layer.ctx->routing.expert.as<std::int32_t>() + slots),
              ref.slots(ref.routing().expert));
    // Each tensor against its own bound: the 16-bit stores on its longest chain (below), sums
    // over the hidden and ffn widths (outputs) or the tokens (weight and gate gradients).
    const int width = std::max(c.hidden, c.ffn);
    // y: x W1 (1), GeLU (2), the experts' output (3), the combine (4).
    EXPECT_LT(rel_l2(layer.y.data(), ref.y.data(), x.size()), sixteen_bit_tolerance(t, 4, width)) << "y";
    EXPECT_GT(rel_l2(layer.y.data(), ref.y.data(), x.size()), 0.0);  // it did round
    layer.backward(dy);
    ref.backward(dy);
    // dx: the weighted output gradient (1), through W2 (2), GeLU' (3), through W1 (4), the dispatch's backward (5).
    EXPECT_LT(rel_l2(layer.dx.data(), ref.dx.data(), x.size()), sixteen_bit_tolerance(t, 5, width)) << "dx";
    // The fp32 gate's gradient reads the experts' output (3 stores).
    EXPECT_LT(rel_l2(layer.layer->gate().grad().as<float>(), ref.gate_g(), std::size_t(c.hidden) * c.experts),
              sixteen_bit_tolerance(t, 3, T))
        << "gate gradient";
    // dW1 = x^T dh: dh after 3 stores, dW1 stored (4); dW2 = a^T dEO: a after 2, dEO 1, dW2 stored (3).
    EXPECT_LT(rel_l2(layer.w1_g().data(), ref.w1_g(), wn), sixteen_bit_tolerance(t, 4, T)) << "w1 gradient";
    EXPECT_LT(rel_l2(layer.w2_g().data(), ref.w2_g(), wn), sixteen_bit_tolerance(t, 3, T)) << "w2 gradient";
  }
}

TEST(Adam, SixteenBitWeightsGetTheRoundedFp32Update) {
  AdamStep a;
  a.lr = 0.01f;
  for (DType t : {DType::f16, DType::bf16}) {
    std::vector<float> master = {1.f, -0.5f, 0.25f}, m(3, 0.f), v(3, 0.f), want = master, wm(3, 0.f), wv(3, 0.f);
    const std::vector<float> g = {0.5f, -1.f, 2.f};
    std::vector<std::uint16_t> g16(3), w16(3);
    for (int i = 0; i < 3; ++i) g16[i] = to_bits16(t, g[i]);  // exact in both
    adam_step(Exec{}, 3, a, master.data(), m.data(), v.data(), g16.data(), w16.data(), t);
    adam_step_cpu(3, a, want.data(), wm.data(), wv.data(), g.data());
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(master[i], want[i]);
      EXPECT_EQ(from_bits16(t, w16[i]), round_to(t, want[i]));
    }
    EXPECT_THROW(adam_step(Exec{}, 3, a, master.data(), m.data(), v.data(), g16.data(), master.data(), t), Error);
  }
}

// runtime/adamw.h's state: a bf16 parameter's fp32 master read from the weight once and kept (1.0
// moves by lr = 1e-3 a step, under half of bf16's spacing below 1, and still reaches 0.99609375
// after 4 steps), an fp32 parameter its own master, the steps counted from 1, every byte of it a
// model state in the pool.
TEST(AdamW, EachParameterKeepsItsMomentsAndMasterAndTheStepsAreCounted) {
  Device dev = Device::open(Backend::cpu);
  const Stream& s = dev.default_stream();
  TrackingAllocator alloc(Backend::cpu);
  std::vector<float> w32 = {0.5f, -3.f};
  const std::vector<float> g32 = {0.25f, 1.f}, g = {0.5f, 1.f, 1.5f};
  std::vector<std::uint16_t> w16(3, to_bits16(DType::bf16, 1.f)), g16(3);
  for (int i = 0; i < 3; ++i) g16[i] = to_bits16(DType::bf16, g[i]);
  AdamStep hyper;
  hyper.lr = 1e-3f;
  hyper.weight_decay = 0.f;
  hyper.step = 7;  // ignored: AdamW counts its own
  AdamW adam(hyper, dev, alloc);
  EXPECT_EQ(adam.add(w32.data(), 2, DType::f32, s), 0u);
  EXPECT_EQ(adam.add(w16.data(), 3, DType::bf16, s), 1u);
  s.synchronize();
  EXPECT_EQ(adam.moment_bytes(), 8u * 5);
  EXPECT_EQ(adam.master_bytes(), 4u * 3);
  EXPECT_EQ(alloc.current(MemTag::model_states), adam.moment_bytes() + adam.master_bytes());
  EXPECT_EQ(adam.master(0), w32.data());
  EXPECT_THROW(adam.update(0, g32.data(), s), Error);  // before the first next_step()
  std::vector<float> want32 = {0.5f, -3.f}, m32(2, 0.f), v32(2, 0.f), want16(3, 1.f), m16(3, 0.f), v16(3, 0.f);
  for (int step = 1; step <= 4; ++step) {
    adam.next_step(s);
    adam.update(0, g32.data(), s);
    adam.update(1, g16.data(), s);
    s.synchronize();
    AdamStep a = hyper;
    a.step = step;
    adam_step_cpu(2, a, want32.data(), m32.data(), v32.data(), g32.data());
    adam_step_cpu(3, a, want16.data(), m16.data(), v16.data(), g.data());
    for (int i = 0; i < 2; ++i) EXPECT_EQ(w32[i], want32[i]) << "step " << step;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(adam.master(1)[i], want16[i]) << "step " << step;
      EXPECT_EQ(from_bits16(DType::bf16, w16[i]), round_to(DType::bf16, want16[i])) << "step " << step;
    }
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(from_bits16(DType::bf16, w16[i]), 0.99609375f);
  EXPECT_THROW(adam.add(w32.data(), 2, DType::i32, s), Error);
}

// One fp32 and one bf16 parameter under DataParallelAdam (no DP group): 1.0 in bf16 moves by
// lr = 1e-3 a step (Adam's update is lr for a constant gradient), under half of bf16's spacing
// of 2^-8 below 1: re-read from the weights every step it would never move; with its master it
// reaches 0.99609375 after 4 steps. The fp32 parameter steps as on its own.
TEST(DataParallelAdam, SixteenBitParametersKeepFp32Masters) {
  Device dev = Device::open(Backend::cpu);
  const Stream& s = dev.default_stream();
  TrackingAllocator alloc(Backend::cpu);
  Buffer w32 = alloc.allocate(8, MemTag::model_states), g32 = alloc.allocate(8, MemTag::model_states);
  Buffer w16 = alloc.allocate(6, MemTag::model_states), g16 = alloc.allocate(6, MemTag::model_states);
  const std::vector<float> w32_init = {0.5f, -3.f}, g32_val = {0.25f, 1.f};
  std::copy(w32_init.begin(), w32_init.end(), w32.as<float>());
  std::copy(g32_val.begin(), g32_val.end(), g32.as<float>());
  for (int i = 0; i < 3; ++i) {
    w16.as<std::uint16_t>()[i] = to_bits16(DType::bf16, 1.f);
    g16.as<std::uint16_t>()[i] = to_bits16(DType::bf16, 0.5f * float(i + 1));
  }
  AdamStep hyper;
  hyper.lr = 1e-3f;
  hyper.weight_decay = 0.f;
  DataParallelAdam opt({{&w32, &g32, DType::f32}, {&w16, &g16, DType::bf16}}, nullptr, false, hyper, dev, alloc);
  EXPECT_EQ(opt.parameters(), 5u);
  EXPECT_EQ(opt.master_bytes(), 12u);
  EXPECT_EQ(opt.master_of(w32), nullptr);
  std::vector<float> want32 = w32_init, m32(2, 0.f), v32(2, 0.f), want16(3, 1.f), m16(3, 0.f), v16(3, 0.f);
  for (int step = 1; step <= 4; ++step) {
    opt.step(s);
    s.synchronize();
    AdamStep a = hyper;
    a.step = step;
    adam_step_cpu(2, a, want32.data(), m32.data(), v32.data(), g32_val.data());
    const std::vector<float> g = {0.5f, 1.f, 1.5f};
    adam_step_cpu(3, a, want16.data(), m16.data(), v16.data(), g.data());
    for (int i = 0; i < 2; ++i) EXPECT_EQ(w32.as<float>()[i], want32[i]) << "step " << step;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(opt.master_of(w16)[i], want16[i]) << "step " << step;
      EXPECT_EQ(from_bits16(DType::bf16, w16.as<std::uint16_t>()[i]), round_to(DType::bf16, want16[i])) << "step " << step;
    }
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(from_bits16(DType::bf16, w16.as<std::uint16_t>()[i]), 0.99609375f);
  EXPECT_EQ(round_to(DType::bf16, 1.f - 1e-3f), 1.f);  // what a step from the rounded weight gives
}

// The GPT model in fp16 and bf16 (blocks, embeddings and output layer; LayerNorms, gates and
// loss in fp32), dense and with MoE blocks, against the fp32 model holding the same rounded
// weights: the loss and every gradient within the type's rounding; then one AdamW step leaves
// each 16-bit weight its fp32 master rounded.
// The small GPT of the model tests, with 4 experts on every other FFN where `moe`.
GptConfig small_gpt(bool moe) {
  const ModelShape dense{.layers = 2, .hidden = 16, .ffn = 32, .heads = 2, .seq = 8, .vocab = 11};
  ModelShape with_experts = dense;
  with_experts.experts = 4;  // top-1, dropless
  with_experts.moe_every = 2;
  return gpt_config(moe ? with_experts : dense);
}

// Two one-rank GPT models on one CPU device, local dispatcher, initialised from the same seed.
struct ModelPair {
  ModelPair(const GptConfig& ca, const GptConfig& cb)
      : a(ca, dev, alloc, nullptr, testing_util::local_dispatcher), b(cb, dev, alloc, nullptr, testing_util::local_dispatcher) {
    a.init(5, dev.default_stream());
    b.init(5, dev.default_stream());
  }
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc{Backend::cpu};
  GptModel a, b;
};

TEST(SixteenBitOnTheCpu, GptModelMatchesTheFp32ModelOnRoundedWeights) {
  const GptConfig base = small_gpt(false);
  const int sequences = 2, T = sequences * base.seq;
  const auto tokens = testing_util::token_ids(T, base.vocab, 3), targets = testing_util::token_ids(T, base.vocab, 4);
  for (bool moe : {false, true})
    for (DType t : {DType::f16, DType::bf16}) {
      SCOPED_TRACE(std::string(moe ? "MoE " : "dense ") + std::string(dtype_name(t)));
      const GptConfig c = small_gpt(moe);
      GptConfig c16 = c;
      c16.dtype = t;
      ModelPair pair(c16, c);
      GptModel &m16 = pair.a, &m32 = pair.b;
      Device& dev = pair.dev;
      TrackingAllocator& alloc = pair.alloc;
      const Stream& s = dev.default_stream();
      auto p16 = m16.trained_parameters(), p32 = m32.trained_parameters();
      ASSERT_EQ(p16.size(), p32.size());
      int sixteen = 0;
      for (std::size_t i = 0; i < p16.size(); ++i)
        if (p16[i].dtype != DType::f32) {
          round_to(t, p32[i].weight->as<float>(), p32[i].weight->bytes() / 4);
          ++sixteen;
        }
      EXPECT_GE(sixteen, moe ? 8 : 10);  // embeddings, attention, MLPs or experts
      const double l16 = m16.forward_backward(tokens.data(), targets.data(), sequences, 1.f / T, s);
      const double l32 = m32.forward_backward(tokens.data(), targets.data(), sequences, 1.f / T, s);
      // The longest chain of 16-bit stores: the embedding (1); per block 10 in the forward
      // (LN1, QKV, scores, probabilities, context, the projection into the residual, LN2, the MLP's
      // or experts' input, GeLU, the output into the residual) and 12 in the backward (the same
      // ops' gradients, the attention's two GEMMs per score, the residual adds); the final
      // LayerNorm, the logits, their gradient, the final LayerNorm's gradient (4); the gradient
      // stored (1). Sums run over the vocabulary at most (logits) or the tokens (weights).
      const int stores = 1 + 22 * c.layers + 4 + 1, reduction = std::max(c.vocab, T);
      const double tol = testing_util::sixteen_bit_tolerance(t, stores, reduction);
      // The loss: the forward's chain (1 + 10 per block + 2), averaged over T token losses.
      EXPECT_NEAR(l16, l32, testing_util::sixteen_bit_tolerance(t, 3 + 10 * c.layers, c.vocab) / std::sqrt(double(T)) * std::fabs(l32));
      int rounded_somewhere = 0;
      for (std::size_t i = 0; i < p16.size(); ++i) {  // each tensor on its own: a small one wrong shows
        const auto got = testing_util::host_values(*p16[i].grad, p16[i].dtype), want = testing_util::host_values(*p32[i].grad, DType::f32);
        const double err = testing_util::rel_l2(got.data(), want.data(), want.size());
        EXPECT_LT(err, tol) << "gradient of parameter " << i << " (" << want.size() << " values, "
                            << dtype_name(p16[i].dtype) << ")";
        rounded_somewhere += err > 0;
      }
      EXPECT_GT(rounded_somewhere, 0);
      DataParallelAdam opt(p16, nullptr, false, AdamStep{}, dev, alloc);
      opt.step(s);
      s.synchronize();
      for (const TrainedParameter& p : p16) {
        if (p.dtype == DType::f32) continue;
        const float* master = opt.master_of(*p.weight);
        for (std::size_t j = 0; j < p.weight->bytes() / 2; ++j)
          ASSERT_EQ(from_bits16(t, p.weight->as<std::uint16_t>()[j]), round_to(t, master[j]));
      }
    }
}

// fp16 training scales the loss up (by the token count: per-token sums) and the optimizer
// scales the gradients back: the same gradients, aux losses included, and the same step as the
// mean loss gives (fp32 here, so the two differ only by rounding).
TEST(LossScale, ScaledLossAndDividedGradientsStepAsTheMeanLoss) {
  GptConfig c = small_gpt(true);
  c.moe.aux_coef = 0.5f;  // large, so a missing scale on the aux loss shows
  const int sequences = 2, T = sequences * c.seq;
  const auto tokens = testing_util::token_ids(T, c.vocab, 3), targets = testing_util::token_ids(T, c.vocab, 4);
  ModelPair pair(c, c);
  GptModel &mean = pair.a, &summed = pair.b;
  Device& dev = pair.dev;
  TrackingAllocator& alloc = pair.alloc;
  const Stream& s = dev.default_stream();
  summed.set_loss_scale(float(T));
  mean.forward_backward(tokens.data(), targets.data(), sequences, 1.f / T, s);
  summed.forward_backward(tokens.data(), targets.data(), sequences, 1.f, s);
  auto pm = mean.trained_parameters(), ps = summed.trained_parameters();
  for (std::size_t i = 0; i < pm.size(); ++i) {
    const std::size_t n = pm[i].grad->bytes() / 4;
    std::vector<float> back(ps[i].grad->as<float>(), ps[i].grad->as<float>() + n);
    for (float& v : back) v /= float(T);
    EXPECT_LT(testing_util::rel_l2(back.data(), pm[i].grad->as<float>(), n), 1e-5) << "gradient of parameter " << i;
  }
  DataParallelAdam a(pm, nullptr, false, AdamStep{}, dev, alloc), b(ps, nullptr, false, AdamStep{}, dev, alloc);
  b.set_gradient_scale(1.f / float(T));
  a.step(s);
  b.step(s);
  s.synchronize();
  for (std::size_t i = 0; i < pm.size(); ++i)
    EXPECT_LT(testing_util::rel_l2(ps[i].weight->as<float>(), pm[i].weight->as<float>(), pm[i].weight->bytes() / 4), 1e-5)
        << "parameter " << i << " after the step";
}

TEST(SixteenBitOnTheCpu, TheFp32OnlyPaperGateIsRefusedInSixteenBitModels) {
  GptConfig c = small_gpt(true);
  c.moe.gate = GateImpl::paper;
  EXPECT_FALSE(GptStage::validate(c, 1, 1));
  c.dtype = DType::bf16;
  EXPECT_EQ(GptStage::validate(c, 1, 1).value(),
            "--gate paper: its dense dispatch and combine tensors are fp32; allowed --dtype fp32");
  c.dtype = DType::i32;
  EXPECT_EQ(GptStage::validate(c, 1, 1).value(), "--dtype: int32; allowed: fp32, fp16 and bf16");
}

// Without ZeRO-1 and without a group, a step is one AdamW pass per parameter: it reads the
// gradient in the parameter's dtype, scales it, and writes the fp32 master and the rounded
// weight. After the first step (which reads the 16-bit masters once) nothing else runs: no
// gradient widened into a flat buffer, no scaling pass, no rounding pass, no copy.
TEST(DataParallelAdam, WithoutAGroupEachParameterStepsInOnePass) {
  Device dev = Device::open(Backend::cpu);
  const Stream s = dev.create_stream("optimizer");  // queued: its ops are on the timeline
  TrackingAllocator alloc(Backend::cpu);
  Buffer w32 = alloc.allocate(8, MemTag::model_states), g32 = alloc.allocate(8, MemTag::model_states);
  Buffer w16 = alloc.allocate(6, MemTag::model_states), g16 = alloc.allocate(6, MemTag::model_states);
  const std::vector<float> g32_val = {0.25f, 1.f}, g16_val = {0.5f, -1.f, 1.5f};
  for (int i = 0; i < 2; ++i) w32.as<float>()[i] = 0.5f * float(i), g32.as<float>()[i] = g32_val[i];
  for (int i = 0; i < 3; ++i) {
    w16.as<std::uint16_t>()[i] = to_bits16(DType::bf16, 1.f);
    g16.as<std::uint16_t>()[i] = to_bits16(DType::bf16, g16_val[i]);
  }
  DataParallelAdam opt({{&w32, &g32, DType::f32}, {&w16, &g16, DType::bf16}}, nullptr, false, AdamStep{}, dev, alloc);
  EXPECT_EQ(opt.optimizer_state_bytes(), 8u * 5);
  opt.set_gradient_scale(0.5f);
  std::vector<float> want32 = {0.f, 0.5f}, want16(3, 1.f), m(5, 0.f), v(5, 0.f);
  for (int step = 1; step <= 2; ++step) {
    std::vector<TimelineEntry> ops;
    {
      testing_util::RecordedTimeline timeline;
      opt.step(s);
      s.synchronize();
      for (const TimelineEntry& e : timeline.entries())
        if (!e.range) ops.push_back(e);
    }
    std::vector<std::string> names;
    for (const TimelineEntry& e : ops) names.push_back(e.name);
    // The step counted on the device (a replayed graph counts its own), then one pass per
    // parameter; the first step also makes the count and reads the bf16 master.
    const std::vector<std::string> want_names =
        step == 1 ? std::vector<std::string>{"fill zero", "adam_count_step", "convert", "adam_step", "adam_step"}
                  : std::vector<std::string>{"adam_count_step", "adam_step", "adam_step"};
    EXPECT_EQ(names, want_names) << "step " << step;
    AdamStep a;
    a.step = step;
    std::vector<float> scaled32 = g32_val, scaled16 = g16_val;
    for (float& g : scaled32) g *= 0.5f;
    for (float& g : scaled16) g *= 0.5f;
    adam_step_cpu(2, a, want32.data(), m.data(), v.data(), scaled32.data());
    adam_step_cpu(3, a, want16.data(), m.data() + 2, v.data() + 2, scaled16.data());
    for (int i = 0; i < 2; ++i) EXPECT_EQ(w32.as<float>()[i], want32[i]) << "step " << step;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(opt.master_of(w16)[i], want16[i]) << "step " << step;
      EXPECT_EQ(w16.as<std::uint16_t>()[i], to_bits16(DType::bf16, want16[i])) << "step " << step;
    }
  }
}

}  // namespace
}  // namespace moebench
