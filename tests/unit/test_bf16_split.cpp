// bf16 parts of fp32 values (kernels/bf16_split.h) and the gate that uses them: the parts sum
// back to each value; a 16-bit GEMM over them into fp32 is as accurate as an fp32 GEMM, where the
// leading part alone is not; and the bf16 gate's logits, weight gradient and input gradient
// agree with the fp32 gate's on the same tokens, without a widened copy of the tokens.
#include <gtest/gtest.h>
#include <cmath>
#include <map>
#include <string>
#include <random>
#include "kernels/bf16_split.h"
#include "kernels/convert.h"
#include "kernels/gemm.h"
#include "moe_test_util.h"
#include "timeline_util.h"

namespace moebench {
using namespace testing_util;

namespace {

std::vector<float> spread_values(std::size_t n, std::uint64_t seed) {  // signs and magnitudes over 2^-30 .. 2^20
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> mant(1.0, 2.0), expo(-30, 20);
  std::vector<float> v(n);
  for (auto& x : v) x = float((g() & 1 ? -1 : 1) * mant(g) * std::exp2(std::floor(expo(g))));
  return v;
}

float part(const std::vector<std::uint16_t>& d, std::size_t i) { return from_bits16(DType::bf16, d[i]); }

}  // namespace

TEST(Bf16Split, ThreePartsSumBackToEachValueInTheSlicesAsked) {
  const int rows = 7, cols = 33;
  const auto w = spread_values(std::size_t(rows) * cols, 1);
  std::vector<std::uint16_t> d(std::size_t(rows) * 4 * cols);
  split_bf16(Exec{}, w.data(), rows, cols, Bf16Parts{4, {0, 1, 2, 0}}, d.data());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const std::size_t o = std::size_t(r) * 4 * cols + c;
      const float hi = part(d, o), lo = part(d, o + cols), lo2 = part(d, o + 2 * cols);
      EXPECT_EQ(double(hi) + double(lo) + double(lo2), double(w[r * cols + c])) << r << ", " << c;
      EXPECT_EQ(hi, round_to(DType::bf16, w[r * cols + c]));
      EXPECT_LE(std::fabs(lo), std::ldexp(std::fabs(hi), -8));
      EXPECT_EQ(d[o + 3 * cols], d[o]) << "slice 3 asked for the leading part again";
    }
  EXPECT_THROW(split_bf16(Exec{}, w.data(), rows, cols, Bf16Parts{5, {}}, d.data()), Error);
  EXPECT_THROW(split_bf16(Exec{}, w.data(), rows, cols, Bf16Parts{1, {3}}, d.data()), Error);
}

// x (bf16, exact in fp32) times w (fp32): over w's three parts side by side, then the slices
// summed, against the product in double.
TEST(Bf16Split, AGemmOverThePartsIsAsAccurateAsFp32AndTheLeadingPartAloneIsNot) {
  const int T = 40, H = 96, E = 8;
  std::vector<float> x = tokens(T, H, 3), w = tokens(H, E, 4);
  round_to(DType::bf16, x.data(), x.size());
  std::vector<double> want(std::size_t(T) * E, 0.0);
  double scale = 0;
  for (int t = 0; t < T; ++t)
    for (int e = 0; e < E; ++e)
      for (int h = 0; h < H; ++h) {
        want[t * E + e] += double(x[t * H + h]) * w[h * E + e];
        scale = std::max(scale, std::fabs(double(x[t * H + h]) * w[h * E + e]));
      }
  const auto x16 = bits16(DType::bf16, x);
  auto error_of = [&](Bf16Parts parts) {
    std::vector<std::uint16_t> wp(std::size_t(H) * parts.count * E);
    split_bf16(Exec{}, w.data(), H, E, parts, wp.data());
    std::vector<float> slices(std::size_t(T) * 3 * E, 0.f), got(std::size_t(T) * E);
    GemmArgs g = dense_gemm(false, false, T, parts.count * E, H, x16.data(), wp.data(), slices.data(), DType::bf16);
    g.ldc = 3 * E;
    g.c_dtype = DType::f32;
    gemm(Exec{}, g);
    sum_split3(Exec{}, slices.data(), T, E, got.data());
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    return worst / (scale * H);
  };
  EXPECT_LT(error_of(Bf16Parts{3, {0, 1, 2}}), 4 * std::ldexp(1.0, -24));
  EXPECT_GT(error_of(Bf16Parts{1, {0}}), 1e-5) << "the leading part alone is a bf16 GEMM";
  // C in a type neither the operands' nor fp32 is refused.
  std::vector<std::uint16_t> out(std::size_t(T) * E);
  GemmArgs bad = dense_gemm(false, false, T, E, H, x16.data(), x16.data(), out.data(), DType::bf16);
  bad.c_dtype = DType::f16;
  EXPECT_THROW(gemm(Exec{}, bad), Error);
}

// The gate on bf16 tokens against the same gate on their fp32 values: the same experts, logits
// to fp32 rounding, the weight gradient likewise, and dx to bf16's rounding of it.
TEST(Bf16Split, TheBf16GateMatchesTheFp32GateOnTheSameTokens) {
  MoEConfig c;
  c.hidden = 64; c.ffn = 32; c.experts = 16; c.top_k = 2; c.capacity_factor = std::nullopt; c.aux_coef = 0.1f;
  const int T = 96;
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc{Backend::cpu};
  MoEConfig c16 = c;
  c16.dtype = DType::bf16;
  Gate g32(c, dev, alloc), g16(c16, dev, alloc);
  const Stream& s = dev.default_stream();
  g32.init(5, s);
  g16.init(5, s);
  std::vector<float> x = tokens(T, c.hidden, 6);
  round_to(DType::bf16, x.data(), x.size());
  const auto x16 = bits16(DType::bf16, x);
  Routing r32 = g32.forward(x.data(), T, 1, s), r16 = g16.forward(x16.data(), T, 1, s);
  EXPECT_FALSE(r16.x32) << "the bf16 gate widened its tokens";
  const std::size_t te = std::size_t(T) * c.experts, ts = std::size_t(T) * 2;
  EXPECT_EQ(std::vector<std::int32_t>(r16.expert.as<std::int32_t>(), r16.expert.as<std::int32_t>() + ts),
            std::vector<std::int32_t>(r32.expert.as<std::int32_t>(), r32.expert.as<std::int32_t>() + ts));
  EXPECT_LT(rel_l2(r16.logits.as<float>(), r32.logits.as<float>(), te), 1e-6);
  const std::vector<float> dweight = tokens(T, 2, 7);
  std::vector<float> dx32(x.size(), 0.f), grad32(std::size_t(c.hidden) * c.experts), grad16(grad32.size());
  std::vector<std::uint16_t> dx16(x.size(), 0);
  g32.backward(r32, x.data(), dweight.data(), dx32.data(), 1.f, grad32.data(), s);
  g16.backward(r16, x16.data(), dweight.data(), dx16.data(), 1.f, grad16.data(), s);
  EXPECT_LT(rel_l2(grad16.data(), grad32.data(), grad32.size()), 1e-6);
  // dx (added to zeros) is the fp32 product rounded once to bf16: off from that only where the
  // terms left out (2^-16 of it) tip a rounding, rarely; a weight without its second part (2^-9)
  // would tip half of them.
  std::size_t tipped = 0;
  for (std::size_t i = 0; i < dx16.size(); ++i) tipped += dx16[i] != to_bits16(DType::bf16, dx32[i]);
  EXPECT_LE(tipped, dx16.size() / 50) << "of " << dx16.size();
}

// The bf16 gate's routing starts from the GEMM's slices: one op sums them into the logits, routes
// and places the assignments (no sum_split3, softmax or positions op of its own:
// kernels/routing.h), and the logits it leaves are the slices' sum.
TEST(Bf16Split, TheBf16GateSumsItsSlicesInsideTheTopK) {
  MoEConfig c;
  c.hidden = 64; c.ffn = 32; c.experts = 16; c.top_k = 2; c.dtype = DType::bf16;
  const int T = 40;
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc{Backend::cpu};
  Gate gate(c, dev, alloc);
  const Stream s = dev.create_stream("gate");  // queued: its ops are on the timeline
  gate.init(5, s);
  std::vector<float> x = tokens(T, c.hidden, 6);
  const auto x16 = bits16(DType::bf16, x);
  std::map<std::string, int> ops;
  Routing r;
  {
    RecordedTimeline timeline;
    r = gate.forward(x16.data(), T, 1, s);
    s.synchronize();
    for (const TimelineEntry& e : timeline.entries())
      if (!e.range) ++ops[e.name];
  }
  EXPECT_EQ(ops["route_tokens"], 1);
  for (const char* apart : {"sum_split3", "softmax_topk", "softmax_topk_from_slices", "assign_positions"})
    EXPECT_EQ(ops[apart], 0) << apart;
  // The logits it wrote: the product over the weight's three parts, summed.
  const std::size_t te = std::size_t(T) * c.experts;
  std::vector<std::uint16_t> parts(std::size_t(c.hidden) * 3 * c.experts);
  split_bf16(Exec{}, gate.weight().as<float>(), c.hidden, c.experts, Bf16Parts{3, {0, 1, 2}}, parts.data());
  std::vector<float> slices(3 * te), want(te);
  GemmArgs g = dense_gemm(false, false, T, 3 * c.experts, c.hidden, x16.data(), parts.data(), slices.data(), DType::bf16);
  g.c_dtype = DType::f32;
  gemm(Exec{}, g);
  sum_split3(Exec{}, slices.data(), T, c.experts, want.data());
  EXPECT_EQ(std::vector<float>(r.logits.as<float>(), r.logits.as<float>() + te), want);
}

}  // namespace moebench
