// The ring reduce-scatter (comm/ring_reduce_scatter.h) against hand-computed results, and the
// MPI communicator taking it for large buffers, at whatever world size mpirun gives (CTest runs
// 1, 2 and 4 ranks).
#include <gtest/gtest.h>
#include <mpi.h>
#include <algorithm>
#include <cstdint>
#include "kernels/convert.h"
#include "comm/comm.h"
#include "runtime/device.h"
#include "comm/ring_reduce_scatter.h"

namespace moebench {
namespace {

struct World {
  int rank = 0, size = 1;
  World() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
};

// What rank q puts at element j of block b: small integers, exact in every type below.
int ring_term(int q, int b, int j) { return 3 * (q + 1) + 5 * b - j % 7; }

template <class T>
void expect_reduced(MPI_Datatype type, MPI_Op op, int block, const World& w) {
  std::vector<T> send(std::size_t(w.size) * block), recv(std::size_t(block) + 1, T(-9));
  for (int b = 0; b < w.size; ++b)
    for (int j = 0; j < block; ++j) send[std::size_t(b) * block + j] = T(ring_term(w.rank, b, j));
  ring_reduce_scatter(send.data(), recv.data(), block, type, op, MPI_COMM_WORLD);
  int wrong = 0;
  for (int j = 0; j < block; ++j) {
    T want = T(ring_term(0, w.rank, j));
    for (int q = 1; q < w.size; ++q)
      want = op == MPI_SUM ? T(want + T(ring_term(q, w.rank, j))) : std::max(want, T(ring_term(q, w.rank, j)));
    wrong += recv[j] != want;
  }
  EXPECT_EQ(wrong, 0) << "block " << block;
  EXPECT_EQ(recv[block], T(-9)) << "block " << block << ": written past the block";
}

TEST(RingReduceScatter, SumsAndMaximaOfEveryBlockSize) {
  const World w;
  for (int block : {0, 1, 3, 1000}) {
    expect_reduced<float>(MPI_FLOAT, MPI_SUM, block, w);
    expect_reduced<float>(MPI_FLOAT, MPI_MAX, block, w);
    expect_reduced<std::int32_t>(MPI_INT32_T, MPI_SUM, block, w);
    expect_reduced<std::int64_t>(MPI_INT64_T, MPI_MAX, block, w);
  }
}

// Terms of very different sizes, so that a float sum depends on the order it is taken in.
float order_sensitive_term(int q, int b, int j) {
  constexpr float kPattern[5] = {3e7f, 1.f, -3e7f, 5.f, -2.f};
  return kPattern[(q + b + j) % 5] * float(1 + j % 3);
}

// The MPI communicator's reduce-scatter of a buffer of 256 KiB and more is the ring: each block's
// terms are added in ring order (rank b + 1's first, rank b's last), to the bit. MPI's own
// algorithm adds them in another order, which gives other sums on 3 ranks and more (but for the
// last rank's block, whose ring order is the ranks' order).
TEST(RingReduceScatter, TheCommunicatorAddsLargeBuffersInRingOrder) {
  auto comm = make_mpi_communicator();
  const Stream s;
  const int r = comm->rank(), n = comm->size();
  const int block = (256 << 10) / 4 / n + 1;
  std::vector<float> send(std::size_t(n) * block), recv(block);
  for (int b = 0; b < n; ++b)
    for (int j = 0; j < block; ++j) send[std::size_t(b) * block + j] = order_sensitive_term(r, b, j);
  comm->reduce_scatter(send.data(), recv.data(), block, DType::f32, ReduceOp::sum, s);
  int wrong = 0, order_matters = 0;
  for (int j = 0; j < block; ++j) {
    float ring = order_sensitive_term((r + 1) % n, r, j), by_rank = order_sensitive_term(0, r, j);
    for (int k = 2; k <= n; ++k) ring = order_sensitive_term((r + k) % n, r, j) + ring;
    for (int q = 1; q < n; ++q) by_rank = by_rank + order_sensitive_term(q, r, j);
    wrong += recv[j] != ring;
    order_matters += ring != by_rank;
  }
  EXPECT_EQ(wrong, 0);
  if (n >= 3 && r < n - 1) {
    EXPECT_GT(order_matters, block / 8) << "the terms no longer tell one order from another";
  }

  // 16-bit types through the ring: MPI's user ops (widen, add in fp32, round) apply.
  for (DType t : {DType::f16, DType::bf16}) {
    std::vector<std::uint16_t> send16(send.size()), recv16(block);
    for (int b = 0; b < n; ++b)
      for (int j = 0; j < block; ++j) send16[std::size_t(b) * block + j] = to_bits16(t, float(ring_term(r, b, j)));
    comm->reduce_scatter(send16.data(), recv16.data(), block, t, ReduceOp::sum, s);
    int wrong16 = 0;
    for (int j = 0; j < block; ++j) {
      int want = 0;
      for (int q = 0; q < n; ++q) want += ring_term(q, r, j);
      wrong16 += from_bits16(t, recv16[j]) != float(want);
    }
    EXPECT_EQ(wrong16, 0) << dtype_name(t);
  }
}

}  // namespace
}  // namespace moebench
