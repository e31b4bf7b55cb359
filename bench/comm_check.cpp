#include "bench/comm_check.h"
#include <cmath>

namespace moebench::comm_bench {

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> all = {Collective::all_to_all, Collective::all_reduce, Collective::all_gather,
                                              Collective::reduce_scatter, Collective::send_recv};
  return all;
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::all_to_all: return "all_to_all";
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::send_recv: return "send_recv";
  }
  return "?";
}

std::optional<Collective> parse_collective(const std::string& s) {
  for (Collective c : all_collectives())
    if (s == collective_name(c)) return c;
  return std::nullopt;
}

Geometry geometry(Collective c, std::uint64_t bytes, int ranks, DType t) {
  const std::size_t e = dtype_size(t);
  const std::size_t n = static_cast<std::size_t>(ranks);
  Geometry g;
  switch (c) {
    case Collective::all_reduce:
    case Collective::send_recv:
      g.block = bytes / e;
      g.send_count = g.recv_count = g.block;
      g.size_bytes = g.block * e;
      break;
    case Collective::all_gather:
      g.block = bytes / (e * n);
      g.send_count = g.block;
      g.recv_count = g.block * n;
      g.size_bytes = g.recv_count * e;
      break;
    case Collective::reduce_scatter:
      g.block = bytes / (e * n);
      g.send_count = g.block * n;
      g.recv_count = g.block;
      g.size_bytes = g.send_count * e;
      break;
    case Collective::all_to_all:
      g.block = bytes / (e * n);
      g.send_count = g.recv_count = g.block * n;
      g.size_bytes = g.send_count * e;
      break;
  }
  return g;
}

double bus_factor(Collective c, int ranks) {
  const double n = ranks;
  switch (c) {
    case Collective::all_reduce: return 2.0 * (n - 1) / n;
    case Collective::send_recv: return 1.0;
    default: return (n - 1) / n;
  }
}

float input_value(int rank, std::size_t index) {
  return static_cast<float>(static_cast<int>((static_cast<std::size_t>(rank) * 131 + index * 7) % 17) - 8);
}

void fill_send(Collective, int rank, const Geometry& g, float* send) {
  for (std::size_t i = 0; i < g.send_count; ++i) send[i] = input_value(rank, i);
}

float expected_value(Collective c, int rank, int ranks, const Geometry& g, std::size_t j) {
  switch (c) {
    case Collective::all_reduce: {
      float s = 0;
      for (int r = 0; r < ranks; ++r) s += input_value(r, j);
      return s;
    }
    case Collective::all_gather: return input_value(static_cast<int>(j / g.block), j % g.block);
    case Collective::reduce_scatter: {
      float s = 0;
      for (int r = 0; r < ranks; ++r) s += input_value(r, static_cast<std::size_t>(rank) * g.block + j);
      return s;
    }
    case Collective::all_to_all:
      return input_value(static_cast<int>(j / g.block), static_cast<std::size_t>(rank) * g.block + j % g.block);
    case Collective::send_recv: return input_value((rank - 1 + ranks) % ranks, j);
  }
  return NAN;
}

std::int64_t count_wrong(Collective c, int rank, int ranks, const Geometry& g, const float* recv, DType t) {
  std::int64_t wrong = 0;
  for (std::size_t j = 0; j < g.recv_count; ++j) {
    const float want = expected_value(c, rank, ranks, g, j);
    // Exact for the small integers used up to 32 ranks; beyond, allow the dtype's rounding.
    const double tol = dtype_epsilon(t) * std::fabs(want) * (ranks > 32 ? ranks : 0);
    if (!(std::fabs(double(recv[j]) - double(want)) <= tol)) ++wrong;
  }
  return wrong;
}

}  // namespace moebench::comm_bench
