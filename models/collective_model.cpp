#include "models/collective_model.h"
#include <algorithm>
#include <optional>
#include "models/piecewise_linear.h"

namespace moebench {

double ring_all_reduce_seconds(double bytes, int p, const Link& l) {
  return p <= 1 ? 0 : 2.0 * (p - 1) * (l.latency + bytes / (double(p) * l.bandwidth));
}
double ring_all_gather_seconds(double bytes, int p, const Link& l) {
  return p <= 1 ? 0 : (p - 1) * (l.latency + bytes / (double(p) * l.bandwidth));
}
double ring_reduce_scatter_seconds(double bytes, int p, const Link& l) { return ring_all_gather_seconds(bytes, p, l); }
double pairwise_all_to_all_seconds(double bytes, int p, const Link& l) { return ring_all_gather_seconds(bytes, p, l); }
double send_recv_seconds(double bytes, const Link& l) { return l.latency + bytes / l.bandwidth; }

Placement place_group(const HardwareProfile& hw, int ranks, int stride) {
  Placement g;
  g.ranks = std::max(ranks, 1);
  // Consecutive ranks `stride` apart: a node of gpus_per_node devices holds gpus_per_node /
  // stride of them (at least one).
  g.per_node = std::clamp(hw.gpus_per_node / std::max(stride, 1), 1, g.ranks);
  g.sharing = std::clamp(stride, 1, hw.gpus_per_node);
  return g;
}

static Link intra(const HardwareProfile& hw) { return {hw.intra_latency, hw.intra_bw}; }

static double spread_share(int p) { return double(p - 1) / double(p); }

// The profile's measured time of `kind` at `bytes` for a group of `ranks` on one node, where it
// has one: between two measured sizes the line through them (an alpha-beta of that size range:
// MPI and NCCL change protocol and algorithm between ranges, which one alpha and beta do not
// follow), below the smallest that size's time (latency-bound), past the largest the last
// range's line; a group of other than the measured gpus_per_node ranks scales by `formula`'s
// ratio on the profile's link.
static std::optional<double> measured_seconds(const HardwareProfile& hw, const std::string& kind, double bytes, int ranks,
                                              double (*formula)(double, int, const Link&)) {
  const auto it = hw.collective_seconds.find(kind);
  if (it == hw.collective_seconds.end()) return std::nullopt;
  const auto& curve = it->second;
  std::vector<double> sizes, times, knots;
  for (const auto& [b, t] : curve) {
    sizes.push_back(b);
    times.push_back(t);
  }
  knots.assign(sizes.begin() + 1, sizes.end() - 1);
  const double t = PiecewiseLinear::fit(sizes, times, knots)(std::max(bytes, sizes.front()));
  if (!formula || ranks == hw.gpus_per_node) return t;
  const double at_profile = formula(bytes, hw.gpus_per_node, intra(hw));
  return at_profile > 0 ? t * formula(bytes, ranks, intra(hw)) / at_profile : t;
}

// Inside one node: the profile's measured time where it has one, else the formula's; on an
// emulated link, the later of that (MPI's own) and the link's time for the operation's bus
// bytes (nccl-tests' factors, as the runtime books them).
static double inside_node(const HardwareProfile& hw, std::optional<double> measured, double formula, double bus_bytes) {
  const double t = measured.value_or(formula);
  if (!hw.emulated_link) return t;
  return std::max(t, hw.emulated_link->latency + bus_bytes / hw.emulated_link->bandwidth);
}

// Between nodes, each of the node's `per_node` devices carries 1/per_node of the data over the
// node's shared link: a ring over the nodes moving `bytes` per node.
static Link inter_per_node(const HardwareProfile& hw, int sharing = 1) {
  return {hw.inter_latency, hw.inter_bw / std::max(sharing, 1)};
}

// The reduction's own work (the gamma of alpha-beta-gamma): each rank sums (p - 1) / p of the
// buffer, reading two operands and writing one, at the device's memory bandwidth.
static double reduction_seconds(const HardwareProfile& hw, double bytes, int ranks) {
  return 3.0 * bytes * double(ranks - 1) / double(ranks) / hw.memory_bw;
}

double all_reduce_seconds(const HardwareProfile& hw, double bytes, const Placement& g) {
  if (g.ranks <= 1) return 0;
  const double formula = all_reduce_transfer_seconds(hw, bytes, g) + reduction_seconds(hw, bytes, g.ranks);
  if (g.nodes() > 1) return formula;
  return inside_node(hw, measured_seconds(hw, "all_reduce", bytes, g.ranks, ring_all_reduce_seconds), formula,
                     2 * spread_share(g.ranks) * bytes);
}

double all_reduce_transfer_seconds(const HardwareProfile& hw, double bytes, const Placement& g) {
  if (g.ranks <= 1) return 0;
  const int n = g.nodes(), k = g.per_node;
  if (n == 1) return ring_all_reduce_seconds(bytes, k, intra(hw));
  // reduce-scatter inside the node, all-reduce of the shards between nodes (all k shards share
  // the node's link: the node moves `bytes` in all), all-gather inside the node.
  return ring_reduce_scatter_seconds(bytes, k, intra(hw)) + ring_all_reduce_seconds(bytes, n, inter_per_node(hw, g.sharing)) +
         ring_all_gather_seconds(bytes, k, intra(hw));
}

double all_gather_seconds(const HardwareProfile& hw, double bytes, const Placement& g) {
  if (g.ranks <= 1) return 0;
  const int n = g.nodes(), k = g.per_node;
  if (n == 1)
    return inside_node(hw, measured_seconds(hw, "all_gather", bytes, k, ring_all_gather_seconds),
                       ring_all_gather_seconds(bytes, k, intra(hw)), spread_share(k) * bytes);
  return ring_all_gather_seconds(bytes, n, inter_per_node(hw, g.sharing)) + ring_all_gather_seconds(bytes, k, intra(hw));
}

double reduce_scatter_seconds(const HardwareProfile& hw, double bytes, const Placement& g) {
  if (g.ranks <= 1) return 0;
  const int n = g.nodes(), k = g.per_node;
  const double reduce = reduction_seconds(hw, bytes, g.ranks);
  if (n == 1)
    return inside_node(hw, measured_seconds(hw, "reduce_scatter", bytes, k, ring_reduce_scatter_seconds),
                       ring_reduce_scatter_seconds(bytes, k, intra(hw)) + reduce, spread_share(k) * bytes);
  return ring_reduce_scatter_seconds(bytes, k, intra(hw)) + ring_reduce_scatter_seconds(bytes, n, inter_per_node(hw, g.sharing)) +
         reduce;
}

double all_to_all_seconds(const HardwareProfile& hw, double bytes, const Placement& g) {
  const int p = g.ranks, k = g.per_node;
  if (p <= 1) return 0;
  // Each rank sends bytes / p to every peer: (k - 1) peers on its node, (p - k) elsewhere; the
  // node's k ranks share its link for k (p - k) / p of `bytes`. The two kinds of steps overlap
  // (different links); each step pays its latency.
  const double in_node = (k - 1) * (hw.intra_latency + bytes / (double(p) * hw.intra_bw));
  if (p == k)
    return inside_node(hw, measured_seconds(hw, "all_to_all", bytes, p, pairwise_all_to_all_seconds), in_node,
                       spread_share(p) * bytes);
  const double off_node = (p - k) * hw.inter_latency + double(k) * g.sharing * bytes * double(p - k) / double(p) / hw.inter_bw;
  return std::max(in_node, off_node);
}

double send_recv_seconds(const HardwareProfile& hw, double bytes, bool across_nodes) {
  if (across_nodes) return send_recv_seconds(bytes, inter_per_node(hw));
  return inside_node(hw, measured_seconds(hw, "send_recv", bytes, 2, nullptr), send_recv_seconds(bytes, intra(hw)), bytes);
}

double ppmoe_eq2_a2a_over_ffn(int experts, double F, double B, int h) {
  return double(experts - 1) * experts * F / (16.0 * B * h);
}
double ppmoe_eq5_allreduce_over_calc(int tp, double F, double B, int h) {
  return double(tp - 1) * tp * F / (4.0 * B * h);
}

}  // namespace moebench
