// Every communicator operation against hand-computed results, for whatever world size mpirun
// gives (CTest runs 1, 2 and 4 ranks), plus sub-groups: MPI's on the cpu backend, NCCL's with
// device buffers on cuda (MOEBENCH_TEST_BACKEND, tests/mpi/test_backend.h).
#include <gtest/gtest.h>
#include <mpi.h>
#include <numeric>
#include <chrono>
#include <thread>
#include "kernels/convert.h"
#include "comm/comm.h"
#include "runtime/device.h"
#include "models/layout.h"
#include "test_backend.h"

namespace moebench {

class MpiComm : public test_backend::WorldTest<test_backend::WorldOf::backend> {
 protected:
  Device dev = test_backend::open_device();
  Stream& s = dev.default_stream();
  test_backend::DeviceMirror d{dev, s};  // d(v): v's device copy; d.sync(): every copy back
};

TEST_F(MpiComm, AllReduceSumAndMax) {
  std::vector<float> in = {float(r), float(2 * r + 1), -float(r)}, out(3);
  world->all_reduce(d(in), d(out), 3, DType::f32, ReduceOp::sum, s);
  d.sync();
  const float sr = n * (n - 1) / 2.f;
  EXPECT_EQ(out, (std::vector<float>{sr, 2 * sr + n, -sr}));
  world->all_reduce(d(in), d(out), 3, DType::f32, ReduceOp::max, s);
  d.sync();
  EXPECT_EQ(out, (std::vector<float>{float(n - 1), float(2 * n - 1), 0.f}));
  std::vector<std::int64_t> counts = {r + 1, 10};
  world->all_reduce(d(counts), d(counts), 2, DType::i64, ReduceOp::sum, s);  // in place
  d.sync();
  EXPECT_EQ(counts[0], std::int64_t(n) * (n + 1) / 2);
  EXPECT_EQ(counts[1], 10 * n);
}

TEST_F(MpiComm, AllGather) {
  std::vector<float> in = {float(10 * r), float(10 * r + 1)}, out(2 * n);
  world->all_gather(d(in), d(out), 2, DType::f32, s);
  d.sync();
  for (int p = 0; p < n; ++p) {
    EXPECT_EQ(out[2 * p], 10.f * p);
    EXPECT_EQ(out[2 * p + 1], 10.f * p + 1);
  }
}

TEST_F(MpiComm, ReduceScatter) {
  // send block p holds (p, r): rank p receives sum over ranks of (p, r) = (n p, n(n-1)/2)
  std::vector<float> in(2 * n), out(2);
  for (int p = 0; p < n; ++p) { in[2 * p] = float(p); in[2 * p + 1] = float(r); }
  world->reduce_scatter(d(in), d(out), 2, DType::f32, ReduceOp::sum, s);
  d.sync();
  EXPECT_EQ(out[0], float(n * r));
  EXPECT_EQ(out[1], n * (n - 1) / 2.f);
}

TEST_F(MpiComm, AllToAll) {
  std::vector<float> in(3 * n), out(3 * n);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < 3; ++i) in[3 * p + i] = float(100 * r + 10 * p + i);  // from r to p
  world->all_to_all(d(in), d(out), 3, DType::f32, s);
  d.sync();
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(out[3 * p + i], float(100 * p + 10 * r + i));
}

TEST_F(MpiComm, AllToAllVWithUnevenAndEmptyBlocks) {
  // Rank r sends (r + p) % 3 elements to p, valued 1000 r + 10 p + i.
  auto cnt = [](int from, int to) { return std::size_t((from + to) % 3); };
  std::vector<std::size_t> sc(n), sd(n), rc(n), rd(n);
  std::size_t so = 0, ro = 0;
  for (int p = 0; p < n; ++p) {
    sc[p] = cnt(r, p); sd[p] = so; so += sc[p];
    rc[p] = cnt(p, r); rd[p] = ro; ro += rc[p];
  }
  std::vector<float> in(so + 1), out(ro + 1, -1.f);
  for (int p = 0; p < n; ++p)
    for (std::size_t i = 0; i < sc[p]; ++i) in[sd[p] + i] = float(1000 * r + 10 * p + int(i));
  world->all_to_all_v(d(in), sc, sd, d(out), rc, rd, DType::f32, s);
  d.sync();
  for (int p = 0; p < n; ++p)
    for (std::size_t i = 0; i < rc[p]; ++i) EXPECT_EQ(out[rd[p] + i], float(1000 * p + 10 * r + int(i)));
  EXPECT_EQ(out[ro], -1.f);  // nothing written past the received elements
  std::vector<std::size_t> wrong(n + 1);
  EXPECT_THROW(world->all_to_all_v(d(in), wrong, sd, d(out), rc, rd, DType::f32, s), Error);
}

TEST_F(MpiComm, SendRecvRingAndPointToPoint) {
  std::vector<float> in = {float(r), float(r) + 0.5f}, out(2);
  world->send_recv(d(in), (r + 1) % n, d(out), (r - 1 + n) % n, 2, DType::f32, s);
  d.sync();
  const int prev = (r - 1 + n) % n;
  EXPECT_EQ(out, (std::vector<float>{float(prev), prev + 0.5f}));
  if (n >= 2) {
    std::vector<std::int32_t> v = {r * 7};
    if (r == 0) world->send(d(v), 1, DType::i32, 1, s);
    if (r == 1) world->recv(d(v), 1, DType::i32, 0, s);
    d.sync();
    if (r == 1) EXPECT_EQ(v[0], 0);
  }
  EXPECT_THROW(world->send(d(in), 1, DType::f32, n, s), Error);
}

TEST_F(MpiComm, SixteenBitTypesMoveAndReduceInFp32) {
  std::vector<std::uint16_t> in(n, std::uint16_t(r + 1)), out(n);
  world->all_to_all(d(in), d(out), 1, DType::bf16, s);
  d.sync();
  for (int p = 0; p < n; ++p) EXPECT_EQ(out[p], p + 1);
  for (DType t : {DType::f16, DType::bf16}) {
    // Sums of 1 + r / 4 (exact in both), the max, and a reduce-scatter of (p, r) blocks.
    std::vector<std::uint16_t> v = {to_bits16(t, 1.f + 0.25f * float(r)), to_bits16(t, -float(r))}, sum(2);
    test_backend::DeviceMirror m(dev, s);  // this type's vectors
    world->all_reduce(m(v), m(sum), 2, t, ReduceOp::sum, s);
    m.sync();
    EXPECT_EQ(from_bits16(t, sum[0]), float(n) + 0.25f * float(n * (n - 1) / 2)) << dtype_name(t);
    EXPECT_EQ(from_bits16(t, sum[1]), -float(n * (n - 1) / 2)) << dtype_name(t);
    world->all_reduce(m(v), m(v), 2, t, ReduceOp::max, s);  // in place
    m.sync();
    EXPECT_EQ(from_bits16(t, v[0]), 1.f + 0.25f * float(n - 1)) << dtype_name(t);
    EXPECT_EQ(from_bits16(t, v[1]), 0.f) << dtype_name(t);
    std::vector<std::uint16_t> blocks(2 * n), mine(2);
    for (int p = 0; p < n; ++p) {
      blocks[2 * p] = to_bits16(t, float(p));
      blocks[2 * p + 1] = to_bits16(t, float(r));
    }
    world->reduce_scatter(m(blocks), m(mine), 2, t, ReduceOp::sum, s);
    m.sync();
    EXPECT_EQ(from_bits16(t, mine[0]), float(n * r)) << dtype_name(t);
    EXPECT_EQ(from_bits16(t, mine[1]), n * (n - 1) / 2.f) << dtype_name(t);
  }
}

TEST_F(MpiComm, BarrierAndSplitByColour) {
  world->barrier(s);
  // Even and odd ranks form two groups ordered by descending rank.
  auto sub = world->split(r % 2, -r);
  const int group_size = (n + 1 - r % 2) / 2;
  EXPECT_EQ(sub->size(), group_size);
  std::vector<float> in = {float(r)}, out(1);
  sub->all_reduce(d(in), d(out), 1, DType::f32, ReduceOp::sum, s);
  d.sync();
  float want = 0;
  for (int q = r % 2; q < n; q += 2) want += q;
  EXPECT_EQ(out[0], want);
  // Highest rank of the colour is rank 0 of the group.
  int highest = r % 2;
  for (int q = r % 2; q < n; q += 2) highest = q;
  EXPECT_EQ(sub->rank(), (highest - r) / 2);
}

TEST_F(MpiComm, LayoutSubGroupsHoldTheExpectedRanks) {
  if (n != 4) GTEST_SKIP() << "layout groups are checked at 4 ranks";
  ParallelLayout l;
  ASSERT_FALSE(ParallelLayout::make(4, 2, 1, 2, &l));
  auto tp = world->split(l.tp_color(r), r), dp = world->split(l.dp_color(r), r), ep = world->split(l.ep_color(r), r);
  auto sum_ranks = [&](Communicator& c) {
    std::vector<float> in = {float(r)}, out(1);
    test_backend::DeviceMirror m(dev, s);
    c.all_reduce(m(in), m(out), 1, DType::f32, ReduceOp::sum, s);
    m.sync();
    return out[0];
  };
  // tp groups {0,1} {2,3}; dp groups {0,2} {1,3}; ep (= dp here) {0,2} {1,3}
  EXPECT_EQ(sum_ranks(*tp), r < 2 ? 1.f : 5.f);
  EXPECT_EQ(sum_ranks(*dp), r % 2 == 0 ? 2.f : 4.f);
  EXPECT_EQ(sum_ranks(*ep), r % 2 == 0 ? 2.f : 4.f);
}

// Communication on worker streams: a collective enqueued on a stream runs on its worker.
TEST_F(MpiComm, CollectivesRunOnAStreamsWorker) {
  Stream comm_stream = dev.create_stream("comm");
  std::vector<float> x(1000, float(r + 1)), y(1000, 0.f);
  test_backend::DeviceMirror m(dev, comm_stream);
  world->all_reduce(m(x), m(y), x.size(), DType::f32, ReduceOp::sum, comm_stream);
  world->wait(comm_stream);
  m.sync();
  EXPECT_EQ(y[0], n * (n + 1) / 2.f);
  EXPECT_EQ(y[999], n * (n + 1) / 2.f);
}

// Two communicators of the same ranks carry collectives in flight at once, on two streams, in
// a different order on different ranks: one communicator would mismatch or deadlock.
TEST_F(MpiComm, DuplicatedCommunicatorsCarryConcurrentCollectives) {
  auto other = world->dup();
  ASSERT_EQ(other->size(), n);
  ASSERT_EQ(other->rank(), r);
  Stream sa = dev.create_stream("a"), sb = dev.create_stream("b");
  std::vector<float> in_a(8, float(r)), out_a(8), in_b(2 * n), out_b(2 * n);
  for (int p = 0; p < n; ++p) in_b[2 * p] = in_b[2 * p + 1] = float(100 * r + p);
  test_backend::DeviceMirror ma(dev, sa), mb(dev, sb);
  float* a_in = ma(in_a);
  float* a_out = ma(out_a);
  float* b_in = mb(in_b);
  float* b_out = mb(out_b);
  // Odd ranks start the all-to-all long before the all-reduce; even ranks the other way (on the
  // CPU; on CUDA the host waits before it issues them).
  run_on(r % 2 ? sa : sb, "delay", [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); });
  world->all_reduce(a_in, a_out, 8, DType::f32, ReduceOp::sum, sa);
  other->all_to_all(b_in, b_out, 2, DType::f32, sb);
  ma.sync();
  mb.sync();
  EXPECT_EQ(out_a[7], n * (n - 1) / 2.f);
  for (int p = 0; p < n; ++p) EXPECT_EQ(out_b[2 * p], float(100 * p + r)) << p;
}

}  // namespace moebench
