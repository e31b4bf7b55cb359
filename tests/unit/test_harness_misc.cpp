#include <gtest/gtest.h>
#include <thread>
#include "harness/comm.h"
#include "harness/range.h"

namespace moebench {

TEST(SelfCommunicator, CollectivesAreCopiesOfOwnData) {
  auto c = make_self_communicator();
  Stream s;
  EXPECT_EQ(c->size(), 1);
  std::vector<float> in = {1, 2, 3, 4}, out(4, 0);
  c->all_reduce(in.data(), out.data(), 4, DType::f32, ReduceOp::sum, s);
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), 0.f);
  c->all_to_all_v(in.data(), {3}, {1}, out.data(), {3}, {0}, DType::f32, s);
  EXPECT_EQ(out, (std::vector<float>{2, 3, 4, 0}));
  EXPECT_THROW(c->send(in.data(), 1, DType::f32, 1, s), Error);
  EXPECT_EQ(c->split(5, 0)->size(), 1);
}

TEST(Breakdown, RangesTimeTheirRegionByName) {
  Breakdown b;
  Stream s;
  for (int i = 0; i < 2; ++i) {
    ScopedRange outer("moe.expert", s, &b);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ScopedRange inner("moe.gating", s, &b);
  }
  const auto t = b.totals_ms();
  ASSERT_EQ(b.names().size(), 2u);
  EXPECT_EQ(b.names()[0], "moe.gating");  // the inner range closes first
  EXPECT_GE(t.at("moe.expert"), 10.0);
  EXPECT_LT(t.at("moe.gating"), t.at("moe.expert"));
  b.clear();
  EXPECT_TRUE(b.totals_ms().empty());
}

TEST(BytesOf, OverflowIsAnError) {
  EXPECT_EQ(bytes_of(10, DType::bf16), 20u);
  EXPECT_THROW(bytes_of(SIZE_MAX / 2, DType::f32), Error);
}

}  // namespace moebench
