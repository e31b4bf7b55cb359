// A decoder block split over every rank mpirun gives (CTest: 1, 2 and 4) with Megatron's tensor
// parallelism equals the whole block on one rank: the output and the input gradient on every
// rank, the replicated LayerNorms' gradients, and each rank's slices of Wqkv, Wo, W1 and W2's
// gradients; a block whose heads or ffn size the group does not divide is refused by name. On
// MOEBENCH_TEST_BACKEND's backend: on cuda both blocks run on the GPU, the group over NCCL.
#include <gtest/gtest.h>
#include "kernels/convert.h"
#include "moe_test_util.h"
#include "gpt/transformer_block.h"
#include "test_backend.h"

namespace moebench {
using namespace testing_util;

namespace {

TEST(TensorParallelBlock, EqualsTheWholeBlock) {
  auto world = test_backend::world();
  const int t = world->size(), r = world->rank();
  const TransformerBlockConfig cfg{8, 4, 16, 3, std::nullopt};
  ASSERT_FALSE(TransformerBlock::validate(cfg, t)) << "run at 1, 2 or 4 ranks";
  Device dev = test_backend::open_device();
  const Stream& s = dev.default_stream();
  TrackingAllocator alloc(dev.backend(), s);
  test_backend::DeviceMirror on_device(dev, s);
  auto host = [&dev](const Buffer& b) { return test_backend::host_floats(dev, b); };
  const double tol = test_backend::f32_tolerance(1e-5);
  const int sequences = 2, seq = 5, T = sequences * seq, H = cfg.hidden;
  auto x = tokens(T, H, 40), dy = tokens(T, H, 41);

  TransformerBlock whole(cfg, dev, alloc), part(cfg, dev, alloc, world.get());
  whole.init(5, s);
  part.init(5, s);
  std::vector<float> y1(x.size()), y2(x.size(), NAN), dx1(x.size()), dx2(x.size(), NAN);
  auto c1 = whole.forward(on_device(x), on_device(y1), sequences, seq, s);
  whole.backward(c1, on_device(dy), on_device(dx1), s);
  auto c2 = part.forward(on_device(x), on_device(y2), sequences, seq, s);
  part.backward(c2, on_device(dy), on_device(dx2), s);
  on_device.sync();
  EXPECT_LT(rel_diff(y2.data(), y1.data(), y1.size()), tol) << "output";
  EXPECT_LT(rel_diff(dx2.data(), dx1.data(), dx1.size()), tol) << "input gradient";

  auto pw = whole.parameters(), pp = part.parameters();
  // LayerNorms (0, 1, 4, 5): replicated, whole gradients on every rank.
  for (int i : {0, 1, 4, 5}) {
    const auto a = host(*pw[i].second), b = host(*pp[i].second);
    EXPECT_LT(rel_diff(b.data(), a.data(), a.size()), tol) << "LayerNorm parameter " << i;
  }
  const int d = H / cfg.heads, heads = cfg.heads / t, in_g = cfg.heads * d, in_l = heads * d, f = cfg.ffn / t;
  // Wqkv (2): this rank's heads' columns of Q, K and V.
  {
    const auto a = host(*pw[2].second), b = host(*pp[2].second);
    std::vector<float> want;
    for (int row = 0; row < H; ++row)
      for (int which = 0; which < 3; ++which)
        for (int c = 0; c < in_l; ++c) want.push_back(a[std::size_t(row) * 3 * in_g + which * in_g + r * in_l + c]);
    std::vector<float> got;
    for (int row = 0; row < H; ++row)
      for (int which = 0; which < 3; ++which)
        for (int c = 0; c < in_l; ++c) got.push_back(b[std::size_t(row) * 3 * in_l + which * in_l + c]);
    EXPECT_LT(rel_diff(got.data(), want.data(), want.size()), tol) << "Wqkv gradient";
  }
  // Wo (3) and W2 (7): this rank's rows; W1 (6): its columns.
  {
    const auto a = host(*pw[3].second), b = host(*pp[3].second);
    EXPECT_LT(rel_diff(b.data(), a.data() + std::size_t(r) * in_l * H, b.size()), tol) << "Wo gradient";
    const auto a7 = host(*pw[7].second), b7 = host(*pp[7].second);
    EXPECT_LT(rel_diff(b7.data(), a7.data() + std::size_t(r) * f * H, b7.size()), tol) << "W2 gradient";
    const auto a6 = host(*pw[6].second), b6 = host(*pp[6].second);
    std::vector<float> want;
    for (int row = 0; row < H; ++row)
      for (int c = 0; c < f; ++c) want.push_back(a6[std::size_t(row) * cfg.ffn + r * f + c]);
    EXPECT_LT(rel_diff(b6.data(), want.data(), want.size()), 1e-5) << "W1 gradient";
  }
}

// In bf16 (the partial outputs and input gradients all-reduced as 16-bit words): the whole
// bf16 block's output, input gradient, LayerNorm gradients and Wo rows, up to the rounding of
// sums taken in another order.
TEST(TensorParallelBlock, SixteenBitEqualsTheWholeSixteenBitBlock) {
  auto world = test_backend::world();
  const int r = world->rank();
  const TransformerBlockConfig cfg{8, 4, 16, 3, std::nullopt, DType::bf16};
  Device dev = test_backend::open_device();
  const Stream& s = dev.default_stream();
  TrackingAllocator alloc(dev.backend(), s);
  test_backend::DeviceMirror d(dev, s);
  const int sequences = 2, seq = 5, T = sequences * seq, H = cfg.hidden;
  const DType t = DType::bf16;
  auto widen = [t](const std::vector<std::uint16_t>& v) { return widen16(t, v.data(), v.size()); };
  auto x = bits16(t, tokens(T, H, 40)), dy = bits16(t, tokens(T, H, 41));
  TransformerBlock whole(cfg, dev, alloc), part(cfg, dev, alloc, world.get());
  whole.init(5, s);
  part.init(5, s);
  std::vector<std::uint16_t> y1(x.size()), y2(x.size()), dx1(x.size()), dx2(x.size());
  auto c1 = whole.forward(d(x), d(y1), sequences, seq, s);
  whole.backward(c1, d(dy), d(dx1), s);
  auto c2 = part.forward(d(x), d(y2), sequences, seq, s);
  part.backward(c2, d(dy), d(dx2), s);
  d.sync();
  EXPECT_LT(rel_l2(widen(y2).data(), widen(y1).data(), y1.size()), 2e-2) << "output";
  EXPECT_LT(rel_l2(widen(dx2).data(), widen(dx1).data(), dx1.size()), 2e-2) << "input gradient";
  auto pw = whole.parameters(), pp = part.parameters();
  for (int i : {0, 1, 4, 5}) {  // fp32
    const auto a = test_backend::host_floats(dev, *pw[i].second), b = test_backend::host_floats(dev, *pp[i].second);
    EXPECT_LT(rel_l2(b.data(), a.data(), std::size_t(H)), 2e-2) << "LayerNorm " << i;
  }
  const int in_l = (cfg.heads / world->size()) * (H / cfg.heads);
  const auto a = test_backend::host_floats(dev, *pw[3].second, t), b = test_backend::host_floats(dev, *pp[3].second, t);
  EXPECT_LT(rel_l2(b.data(), a.data() + std::size_t(r) * in_l * H, b.size()), 2e-2) << "Wo gradient";
}

TEST(TensorParallelBlock, ShapesTheGroupDoesNotDivideAreRefused) {
  EXPECT_EQ(TransformerBlock::validate({8, 4, 16, 0, std::nullopt}, 3).value(), "--tp: 3 does not divide the 4 heads");
  EXPECT_EQ(TransformerBlock::validate({8, 4, 18, 0, std::nullopt}, 4).value(), "--tp: 4 does not divide the ffn size 18");
  EXPECT_EQ(TransformerBlock::validate({9, 4, 16, 0, std::nullopt}, 1).value(), "--heads: 4 does not divide the hidden size 9");
  EXPECT_FALSE(TransformerBlock::validate({8, 4, 16, 0, std::nullopt}, 4));
}

}  // namespace
}  // namespace moebench
