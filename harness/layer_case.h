// One MoE layer as a bench measures it: the layer with its tensors made from a seed, the tokens
// steered to a popularity and warmed up; the counters a measured run leaves (its work for the
// roofline, the load over every rank's tokens, what padding costs, the memory peaks); and its
// state after the last step as .npy with the meta.json that tests/cli/check_dump.py reads.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include "moe/dispatcher.h"
#include "moe/moe_layer.h"
#include "moe/routing_workload.h"
#include "runtime/runtime.h"

namespace moebench {

struct LayerCase {
  std::string dispatcher;
  TrackingAllocator alloc;  // its own, so its peaks are its own
  std::unique_ptr<MoELayer> layer;
  Buffer x, dy, y, dx;
  std::optional<MoEContext> last;  // the last real forward + backward's micro-batch
  bool dumped = false;
  LayerCase(Backend b, const Stream& s) : alloc(b, s) {}
};

struct LayerInputs {
  int tokens = 0;
  std::uint64_t seed = 0;
  int token_block = 0;  // whose tokens these are: ranks that hold the same tokens share a block
  Popularity popularity;
  int warmup = 1;       // forward + backward steps before it is handed back
};

using MakeDispatcher = std::function<std::unique_ptr<TokenDispatcher>(const DispatcherEnv&)>;

// The layer of `c` with `dispatcher`, its weights from the seed, its input, output gradient and
// outputs, after `warmup` steps on the device's default stream.
std::unique_ptr<LayerCase> make_layer_case(const std::string& dispatcher, const MoEConfig& c, Device& device,
                                           const MakeDispatcher& make, const LayerInputs& in);

// The counters of the layer's last step: the busiest rank's roofline work (roofline_flops,
// roofline_bytes, and roofline_expert_* for its expert GEMMs), the load over every rank's tokens
// (dropped_fraction, load_cv, busiest_over_mean; `counts_load`: whether this rank's tokens count,
// false on all but one rank of a group that holds the same tokens), computed_over_routed_rows,
// and each memory tag's peak_<tag>. Collective over `rt`.
std::map<std::string, double> layer_counters(const Runtime& rt, const LayerCase& lc, bool counts_load);

// One step's phase times, two views from one exchange of every rank's (`mine`: this rank's):
// - slowest_rank: the phases of the rank whose phases add up to the most (the layer ends when it
//   does). Each phase's maximum over the ranks would stack above the layer's own time where ranks
//   are slow in different phases (one waits in the dispatch while another computes).
// - fastest_rank: each phase's least over the ranks. For a phase that ends in an exchange, that is
//   the rank that reached it last and waited on no one: the exchange's own time, without the skew
//   of the compute before it, which the other ranks wait out inside it.
// Collective over `rt`.
struct PhasesOverRanks {
  std::vector<double> slowest_rank, fastest_rank;
};
PhasesOverRanks phases_over_ranks(const Runtime& rt, const std::vector<double>& mine);
// The row of `rows` (ranks rows of equal length, one after another) with the largest sum.
std::size_t largest_row(const std::vector<double>& rows, int ranks);

// What the dumped ranks are, for a checker to rebuild the whole computation.
struct DumpMeta {
  std::string dispatcher, dtype, backend;
  int ranks = 1, tp = 1, tokens_per_rank = 0;
};

// The last step of `lc` as <folder>/rank<r>_*.npy, and rank 0's <folder>/meta.json.
void dump_layer_case(const std::string& folder, int rank, Device& device, LayerCase& lc, const DumpMeta& meta);

}  // namespace moebench
