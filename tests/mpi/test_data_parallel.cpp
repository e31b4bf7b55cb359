// Data parallelism over every rank mpirun gives (CTest: 1, 2 and 4): a mini-batch of 4
// sequences split over the ranks, two AdamW steps, with and without ZeRO-1, leaves every rank
// with the parameters one rank gets from the whole mini-batch; ZeRO-1 holds 1/D of AdamW's
// moments (8 bytes per parameter of its shard) against 8 per parameter without it; with bf16
// parameters and fp32 masters, every rank ends with the weights and masters of one rank stepping
// on the summed gradient.
#include <gtest/gtest.h>
#include <cstdint>
#include "kernels/convert.h"
#include "moe_test_util.h"
#include "pipeline/data_parallel.h"
#include "pipeline/gpt_model.h"

namespace moebench {
using namespace testing_util;

namespace {

const GptConfig kTiny = gpt_config({.layers = 2, .hidden = 8, .ffn = 16, .heads = 2, .seq = 5, .vocab = 11});
constexpr int kDataParallelSequences = 4;

std::vector<float> flat(GptModel& m) {
  std::vector<float> out;
  for (auto& [w, g] : m.parameters()) out.insert(out.end(), w->as<float>(), w->as<float>() + w->bytes() / 4);
  return out;
}

// Two steps: the model's parameters after them. `dp`: nullptr trains on the whole mini-batch.
std::vector<float> train(Communicator* dp, bool zero1, std::size_t* state_bytes = nullptr) {
  Device dev = Device::open(Backend::cpu);
  const Stream& s = dev.default_stream();
  TrackingAllocator alloc(Backend::cpu);
  GptModel model(kTiny, dev, alloc);
  model.init(21, s);
  const int D = dp ? dp->size() : 1, r = dp ? dp->rank() : 0, mine = kDataParallelSequences / D, T = kDataParallelSequences * kTiny.seq;
  AdamStep hyper;
  hyper.lr = 1e-2f;
  DataParallelAdam opt(model.parameters(), dp, zero1, hyper, dev, alloc);
  for (int step = 0; step < 2; ++step) {
    const auto tokens = token_ids(T, kTiny.vocab, 100 + step), targets = token_ids(T, kTiny.vocab, 200 + step);
    model.zero_grad(s);
    const std::size_t first = std::size_t(r) * mine * kTiny.seq;
    model.forward_backward(tokens.data() + first, targets.data() + first, mine, 1.f / T, s);
    opt.step(s);
  }
  s.synchronize();
  if (state_bytes) *state_bytes = opt.optimizer_state_bytes();
  return flat(model);
}

TEST(DataParallel, PlainAndZeroOneEqualOneRankOnTheWholeBatch) {
  auto world = make_mpi_communicator();
  const int D = world->size();
  ASSERT_EQ(kDataParallelSequences % D, 0) << "run at 1, 2 or 4 ranks";
  const auto want = train(nullptr, false);
  std::size_t plain_bytes = 0, zero_bytes = 0;
  const auto plain = train(world.get(), false, &plain_bytes), zero = train(world.get(), true, &zero_bytes);
  EXPECT_LT(rel_diff(plain.data(), want.data(), want.size()), 1e-5) << "plain DP";
  EXPECT_LT(rel_diff(zero.data(), want.data(), want.size()), 1e-5) << "ZeRO-1";
  const std::size_t n = want.size(), padded = (n + D - 1) / D * D;
  EXPECT_EQ(plain_bytes, 8 * n);  // per parameter, in place: no padding
  EXPECT_EQ(zero_bytes, D > 1 ? 8 * padded / D : 8 * padded);
}

// bf16 weights with fp32 masters: 13 elements (padded for the shards), each rank's gradient a
// multiple of its rank + 1 -- quarters, so the sums are exact in any order and in bf16.
// The weights must agree bit for bit; the masters to an ulp or two.
std::pair<std::vector<std::uint16_t>, std::vector<float>> train_bf16(Communicator* dp, bool zero1, bool summed) {
  Device dev = Device::open(Backend::cpu);
  const Stream& s = dev.default_stream();
  TrackingAllocator alloc(Backend::cpu);
  constexpr int n = 13;
  Buffer w = alloc.allocate(2 * n, MemTag::model_states), g = alloc.allocate(2 * n, MemTag::model_states);
  const int D = dp ? dp->size() : 1, r = dp ? dp->rank() : 0;
  for (int i = 0; i < n; ++i) {
    const float share = 0.25f * float(i + 1), all = share * float(D * (D + 1) / 2);
    w.as<std::uint16_t>()[i] = to_bits16(DType::bf16, 1.f - 0.125f * float(i));
    g.as<std::uint16_t>()[i] = to_bits16(DType::bf16, summed ? all : share * float(r + 1));
  }
  AdamStep hyper;
  hyper.lr = 3e-3f;
  DataParallelAdam opt({{&w, &g, DType::bf16}}, dp, zero1, hyper, dev, alloc);
  for (int step = 0; step < 3; ++step) opt.step(s);
  s.synchronize();
  return {std::vector<std::uint16_t>(w.as<std::uint16_t>(), w.as<std::uint16_t>() + n),
          std::vector<float>(opt.master_of(w), opt.master_of(w) + n)};
}

TEST(DataParallel, SixteenBitParametersStepTheirMastersAsOneRank) {
  auto world = make_mpi_communicator();
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
