// Data parallelism over every rank mpirun gives (CTest: 1, 2 and 4): a mini-batch of 4
// sequences split over the ranks, two AdamW steps, with and without ZeRO-1, leaves every rank
// with the parameters one rank gets from the whole mini-batch; ZeRO-1 holds 1/D of AdamW's
// moments (8 bytes per parameter of its shard) against 8 per parameter without it; with bf16
// parameters and fp32 masters, every rank ends with the weights and masters of one rank stepping
// on the summed gradient. On MOEBENCH_TEST_BACKEND's backend (on cuda over NCCL).
#include <gtest/gtest.h>
#include <cstdint>
#include "kernels/convert.h"
#include "moe_test_util.h"
#include "gpt/data_parallel.h"
#include "gpt/gpt_model.h"
#include "test_backend.h"

namespace moebench {
using namespace testing_util;

namespace {

const GptConfig kTiny = gpt_config({.layers = 2, .hidden = 8, .ffn = 16, .heads = 2, .seq = 5, .vocab = 11});
constexpr int kDataParallelSequences = 4;

std::vector<float> flat(Device& dev, GptModel& m) {
  std::vector<float> out;
  for (auto& [w, g] : m.parameters()) {
    const std::vector<float> v = test_backend::host_floats(dev, *w);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Two steps: the model's parameters after them. `dp`: nullptr trains on the whole mini-batch.
std::vector<float> train(Communicator* dp, bool zero1, std::size_t* state_bytes = nullptr) {
  Device dev = test_backend::open_device();
  const Stream& s = dev.default_stream();
  TrackingAllocator alloc(dev.backend(), s);
  GptModel model(kTiny, dev, alloc);
  model.init(21, s);
  const int D = dp ? dp->size() : 1, r = dp ? dp->rank() : 0, mine = kDataParallelSequences / D, T = kDataParallelSequences * kTiny.seq;
  AdamStep hyper;
  hyper.lr = 1e-2f;
  DataParallelAdam opt(model.parameters(), dp, zero1, hyper, dev, alloc);
  for (int step = 0; step < 2; ++step) {
    auto tokens = token_ids(T, kTiny.vocab, 100 + step), targets = token_ids(T, kTiny.vocab, 200 + step);
    test_backend::DeviceMirror d(dev, s);  // this step's: the next step's vectors may reuse the addresses
    model.zero_grad(s);
    const std::size_t first = std::size_t(r) * mine * kTiny.seq;
    model.forward_backward(d(tokens) + first, d(targets) + first, mine, 1.f / T, s);
    s.synchronize();  // the token vectors go at the end of the step
    opt.step(s);
  }
  s.synchronize();
  if (state_bytes) *state_bytes = opt.optimizer_state_bytes();
  return flat(dev, model);
}

TEST(DataParallel, PlainAndZeroOneEqualOneRankOnTheWholeBatch) {
  auto world = test_backend::world();
  const int D = world->size();
  ASSERT_EQ(kDataParallelSequences % D, 0) << "run at 1, 2 or 4 ranks";
  const auto want = train(nullptr, false);
  std::size_t plain_bytes = 0, zero_bytes = 0;
  const auto plain = train(world.get(), false, &plain_bytes), zero = train(world.get(), true, &zero_bytes);
  const double tol = test_backend::f32_tolerance(1e-5);
  EXPECT_LT(rel_diff(plain.data(), want.data(), want.size()), tol) << "plain DP";
  EXPECT_LT(rel_diff(zero.data(), want.data(), want.size()), tol) << "ZeRO-1";
  const std::size_t n = want.size(), padded = (n + D - 1) / D * D;
  EXPECT_EQ(plain_bytes, 8 * n);  // per parameter, in place: no padding
  EXPECT_EQ(zero_bytes, D > 1 ? 8 * padded / D : 8 * padded);
}

// bf16 weights with fp32 masters: 13 elements (padded for the shards), each rank's gradient a
// multiple of its rank + 1 -- quarters, so the sums are exact in any order and in bf16.
// The weights must agree bit for bit; the masters to an ulp or two.
std::pair<std::vector<std::uint16_t>, std::vector<float>> train_bf16(Communicator* dp, bool zero1, bool summed) {
  Device dev = test_backend::open_device();
  const Stream& s = dev.default_stream();
  TrackingAllocator alloc(dev.backend(), s);
  constexpr int n = 13;
  Buffer w = alloc.allocate(2 * n, MemTag::model_states), g = alloc.allocate(2 * n, MemTag::model_states);
  const int D = dp ? dp->size() : 1, r = dp ? dp->rank() : 0;
  std::vector<std::uint16_t> w0(n), g0(n);
  for (int i = 0; i < n; ++i) {
    const float share = 0.25f * float(i + 1), all = share * float(D * (D + 1) / 2);
    w0[i] = to_bits16(DType::bf16, 1.f - 0.125f * float(i));
    g0[i] = to_bits16(DType::bf16, summed ? all : share * float(r + 1));
  }
  dev.copy_to_device(w.data(), w0.data(), 2 * n, s);
  dev.copy_to_device(g.data(), g0.data(), 2 * n, s);
  AdamStep hyper;
  hyper.lr = 3e-3f;
  DataParallelAdam opt({{&w, &g, DType::bf16}}, dp, zero1, hyper, dev, alloc);
  for (int step = 0; step < 3; ++step) opt.step(s);
  std::vector<std::uint16_t> weights(n);
  std::vector<float> masters(n);
  dev.copy_to_host(weights.data(), w.data(), 2 * n, s);
  dev.copy_to_host(masters.data(), opt.master_of(w), 4 * n, s);
  s.synchronize();
  return {weights, masters};
}

TEST(DataParallel, SixteenBitParametersStepTheirMastersAsOneRank) {
  auto world = test_backend::world();
  const auto want = train_bf16(nullptr, false, true);
  for (bool zero1 : {false, true}) {
    const auto got = train_bf16(world.get(), zero1, false);
    EXPECT_EQ(got.first, want.first) << (zero1 ? "ZeRO-1" : "plain DP");
    // Within an ulp or two: the vectorised AdamW loop may contract to FMAs differently at
    // another element count (the shard's, the padding's).
    for (std::size_t i = 0; i < want.second.size(); ++i)
      EXPECT_NEAR(got.second[i], want.second[i], 1e-6) << (zero1 ? "ZeRO-1" : "plain DP") << " " << i;
  }
  EXPECT_NE(want.second[0], 1.f);  // the masters moved
}

}  // namespace
}  // namespace moebench
