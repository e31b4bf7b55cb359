#include "comm/collective_table.h"
#include <cmath>

namespace moebench::collectives {

float input_value(int rank, std::size_t index) {
  return static_cast<float>(static_cast<int>((static_cast<std::size_t>(rank) * 131 + index * 7) % 17) - 8);
}

namespace {

float sum_over_ranks(int ranks, std::size_t index) {
  float s = 0;
  for (int r = 0; r < ranks; ++r) s += input_value(r, index);
  return s;
}

// Layouts: `block` elements per rank-block, in the buffer each side holds.
Geometry whole(std::uint64_t bytes, int, DType t) {  // one buffer of `bytes` on both sides
  Geometry g;
  g.block = bytes / dtype_size(t);
  g.send_count = g.recv_count = g.block;
  g.size_bytes = g.block * dtype_size(t);
  return g;
}
Geometry gathered(std::uint64_t bytes, int ranks, DType t) {  // n blocks received, one sent
  Geometry g;
  g.block = bytes / (dtype_size(t) * std::size_t(ranks));
  g.send_count = g.block;
  g.recv_count = g.block * std::size_t(ranks);
  g.size_bytes = g.recv_count * dtype_size(t);
  return g;
}
Geometry scattered(std::uint64_t bytes, int ranks, DType t) {  // n blocks sent, one received
  Geometry g = gathered(bytes, ranks, t);
  std::swap(g.send_count, g.recv_count);
  return g;
}
Geometry exchanged(std::uint64_t bytes, int ranks, DType t) {  // n blocks each way
  Geometry g = gathered(bytes, ranks, t);
  g.send_count = g.recv_count;
  return g;
}

double twice_n_minus_1_over_n(int ranks) { return 2.0 * (ranks - 1) / ranks; }
double n_minus_1_over_n(int ranks) { return double(ranks - 1) / ranks; }
double one(int) { return 1.0; }

const std::vector<CollectiveSpec> kTable = {
    {Collective::all_to_all, "all_to_all", exchanged, n_minus_1_over_n,
     [](int rank, int, const Geometry& g, std::size_t j) {
       return input_value(static_cast<int>(j / g.block), static_cast<std::size_t>(rank) * g.block + j % g.block);
     },
     [](Communicator& c, const void* send, void* recv, const Geometry& g, DType t, const Stream& s) {
       c.all_to_all(send, recv, g.block, t, s);
     }},
    {Collective::all_reduce, "all_reduce", whole, twice_n_minus_1_over_n,
     [](int, int ranks, const Geometry&, std::size_t j) { return sum_over_ranks(ranks, j); },
     [](Communicator& c, const void* send, void* recv, const Geometry& g, DType t, const Stream& s) {
       c.all_reduce(send, recv, g.block, t, ReduceOp::sum, s);
     }},
    {Collective::all_gather, "all_gather", gathered, n_minus_1_over_n,
     [](int, int, const Geometry& g, std::size_t j) { return input_value(static_cast<int>(j / g.block), j % g.block); },
     [](Communicator& c, const void* send, void* recv, const Geometry& g, DType t, const Stream& s) {
       c.all_gather(send, recv, g.block, t, s);
     }},
    {Collective::reduce_scatter, "reduce_scatter", scattered, n_minus_1_over_n,
     [](int rank, int ranks, const Geometry& g, std::size_t j) {
       return sum_over_ranks(ranks, static_cast<std::size_t>(rank) * g.block + j);
     },
     [](Communicator& c, const void* send, void* recv, const Geometry& g, DType t, const Stream& s) {
       c.reduce_scatter(send, recv, g.block, t, ReduceOp::sum, s);
     }},
    {Collective::send_recv, "send_recv", whole, one,
     [](int rank, int ranks, const Geometry&, std::size_t j) { return input_value((rank - 1 + ranks) % ranks, j); },
     [](Communicator& c, const void* send, void* recv, const Geometry& g, DType t, const Stream& s) {
       const int n = c.size(), r = c.rank();
       c.send_recv(send, (r + 1) % n, recv, (r - 1 + n) % n, g.block, t, s);
     }},
};

}  // namespace

const CollectiveSpec& spec(Collective c) {
  for (const CollectiveSpec& s : kTable)
    if (s.id == c) return s;
  throw Error("unknown collective");
}

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> all = [] {
    std::vector<Collective> v;
    for (const CollectiveSpec& s : kTable) v.push_back(s.id);
    return v;
  }();
  return all;
}

const char* collective_name(Collective c) { return spec(c).name; }

std::vector<std::string> collective_names() {
  std::vector<std::string> out;
  for (const CollectiveSpec& c : kTable) out.push_back(c.name);
  return out;
}

std::optional<Collective> parse_collective(const std::string& s) {
  for (const CollectiveSpec& c : kTable)
    if (s == c.name) return c.id;
  return std::nullopt;
}

Geometry geometry(Collective c, std::uint64_t bytes, int ranks, DType t) { return spec(c).geometry(bytes, ranks, t); }
double bus_factor(Collective c, int ranks) { return spec(c).bus_factor(ranks); }

void fill_send(Collective, int rank, const Geometry& g, float* send) {
  for (std::size_t i = 0; i < g.send_count; ++i) send[i] = input_value(rank, i);
}

float expected_value(Collective c, int rank, int ranks, const Geometry& g, std::size_t j) {
  return spec(c).expected(rank, ranks, g, j);
}

std::int64_t count_wrong(Collective c, int rank, int ranks, const Geometry& g, const float* recv, DType t) {
  const CollectiveSpec& s = spec(c);
  std::int64_t wrong = 0;
  for (std::size_t j = 0; j < g.recv_count; ++j) {
    const float want = s.expected(rank, ranks, g, j);
    // Exact for the small integers used up to 32 ranks; beyond, allow the dtype's rounding.
    const double tol = dtype_epsilon(t) * std::fabs(want) * (ranks > 32 ? ranks : 0);
    if (!(std::fabs(double(recv[j]) - double(want)) <= tol)) ++wrong;
  }
  return wrong;
}

}  // namespace moebench::collectives
