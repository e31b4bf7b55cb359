#include <gtest/gtest.h>
#include <cmath>
#include "comm/collective_table.h"

namespace moebench::collectives {

// Simulates what each collective should deliver from the send patterns of all ranks, so the
// expected values are checked independently of the formula in expected_value().
static std::vector<float> simulate(Collective c, int rank, int n, const Geometry& g) {
  std::vector<std::vector<float>> send(n, std::vector<float>(g.send_count));
  for (int r = 0; r < n; ++r) fill_send(c, r, g, send[r].data());
  std::vector<float> out(g.recv_count, 0.f);
  for (std::size_t j = 0; j < g.recv_count; ++j) {
    switch (c) {
      case Collective::all_reduce: for (int r = 0; r < n; ++r) out[j] += send[r][j]; break;
      case Collective::all_gather: out[j] = send[j / g.block][j % g.block]; break;
      case Collective::reduce_scatter: for (int r = 0; r < n; ++r) out[j] += send[r][rank * g.block + j]; break;
      case Collective::all_to_all: out[j] = send[j / g.block][rank * g.block + j % g.block]; break;
      case Collective::send_recv: out[j] = send[(rank + n - 1) % n][j]; break;
    }
  }
  return out;
}

TEST(CollectiveTable, CorrectDataHasNoWrongElements) {
  for (Collective c : all_collectives())
    for (int n : {1, 2, 4})
      for (int rank = 0; rank < n; ++rank) {
        const Geometry g = geometry(c, 4096, n, DType::f32);
        const auto recv = simulate(c, rank, n, g);
        EXPECT_EQ(count_wrong(c, rank, n, g, recv.data(), DType::f32), 0) << collective_name(c) << " n=" << n;
      }
}

TEST(CollectiveTable, CorruptedElementsAreCounted) {
  for (Collective c : all_collectives()) {
    const int n = 4, rank = 2;
    const Geometry g = geometry(c, 8192, n, DType::f32);
    auto recv = simulate(c, rank, n, g);
    recv[0] += 1.f;
    recv[recv.size() - 1] = -recv[recv.size() - 1] + 0.5f;
    recv[recv.size() / 2] = std::nanf("");
    EXPECT_EQ(count_wrong(c, rank, n, g, recv.data(), DType::f32), 3) << collective_name(c);
  }
}

TEST(CollectiveTable, UnwrittenZeroBufferIsWrong) {
  const Geometry g = geometry(Collective::all_to_all, 1024, 2, DType::f32);
  std::vector<float> zeros(g.recv_count, 0.f);
  // The pattern takes 17 values, one of them 0, so most zeros are wrong.
  EXPECT_GT(count_wrong(Collective::all_to_all, 0, 2, g, zeros.data(), DType::f32), std::int64_t(g.recv_count / 2));
}

TEST(CollectiveTable, GeometryMatchesNcclTestsSizes) {
  Geometry g = geometry(Collective::all_gather, 1024, 4, DType::f32);
  EXPECT_EQ(g.block, 64u);
  EXPECT_EQ(g.recv_count, 256u);
  EXPECT_EQ(g.size_bytes, 1024u);
  g = geometry(Collective::reduce_scatter, 1000, 3, DType::f16);
  EXPECT_EQ(g.block, 166u);
  EXPECT_EQ(g.size_bytes, 996u);
  g = geometry(Collective::all_to_all, 8, 4, DType::f32);
  EXPECT_EQ(g.block, 0u);  // too small for 4 ranks: the bench skips it
}

TEST(CollectiveTable, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_to_all, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_gather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::reduce_scatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::send_recv, 4), 1.0);
}

}  // namespace moebench::collectives
