// The collectives as a table, nccl-tests style: one row per collective (its name, the buffer
// layout a size means, the bus-bandwidth factor, the value each received element must have, and
// the call that runs it), the input pattern (small integers, exact in fp16/bf16 sums) and the
// count of wrong received elements (#wrong). Every program takes the collectives' names from
// here; adding a collective is adding a row.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "kernels/dtype.h"
#include "comm/comm.h"

namespace moebench::collectives {

enum class Collective { all_to_all, all_reduce, all_gather, reduce_scatter, send_recv };
const std::vector<Collective>& all_collectives();
const char* collective_name(Collective c);
std::vector<std::string> collective_names();  // the rows' names, in the table's order
std::optional<Collective> parse_collective(const std::string& s);

struct Geometry {
  std::size_t send_count = 0, recv_count = 0;  // elements in the send and receive buffers
  std::size_t block = 0;                       // per-rank block (elements) where the collective has one
  std::uint64_t size_bytes = 0;                // what algbw divides (nccl-tests' "size")
};

struct CollectiveSpec {
  Collective id;
  const char* name;
  // The largest layout of at most `bytes` for `ranks` ranks; block 0 when it rounds to nothing.
  Geometry (*geometry)(std::uint64_t bytes, int ranks, DType t);
  double (*bus_factor)(int ranks);
  // What element `index` of `rank`'s receive buffer must hold.
  float (*expected)(int rank, int ranks, const Geometry& g, std::size_t index);
  void (*launch)(Communicator& comm, const void* send, void* recv, const Geometry& g, DType t, const Stream& s);
};
const CollectiveSpec& spec(Collective c);

// The table's entries, by collective.
Geometry geometry(Collective c, std::uint64_t bytes, int ranks, DType t);
// nccl-tests factors: 2(n-1)/n all-reduce; (n-1)/n all-to-all, all-gather, reduce-scatter; 1 send/recv.
double bus_factor(Collective c, int ranks);

float input_value(int rank, std::size_t index);
void fill_send(Collective c, int rank, const Geometry& g, float* send);
float expected_value(Collective c, int rank, int ranks, const Geometry& g, std::size_t index);
// Elements of `recv` (recv_count of them, as fp32) that differ from the expected values.
std::int64_t count_wrong(Collective c, int rank, int ranks, const Geometry& g, const float* recv, DType t);

}  // namespace moebench::collectives
