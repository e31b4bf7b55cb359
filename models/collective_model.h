// Alpha-beta cost models of the collectives (NCCL's ring and pairwise algorithms), placed on a
// hardware profile: a group of p ranks on nodes of up to gpus_per_node consecutive ranks; inside
// a node the links of intra_bw per device, between nodes one inter_bw per node shared by its
// devices (hierarchical: the intra-node phases, then the node-to-node phase). Sizes are bytes;
// times seconds. Inside one node, a profile's measured times of a collective (see
// hardware_profile.h) take the formula's place. And PPMoE's analytic ratios (000 Eq. 2 and Eq. 5).
#pragma once
#include "models/hardware_profile.h"

namespace moebench {

struct Link {
  double latency = 0;    // alpha, s per step
  double bandwidth = 0;  // beta^-1, bytes/s
};

// Flat algorithms over one link type.
double ring_all_reduce_seconds(double bytes, int ranks, const Link& l);      // 2(p-1)(a + n/(p B))
double ring_all_gather_seconds(double bytes, int ranks, const Link& l);      // (p-1)(a + n/(p B)); n: the whole result
double ring_reduce_scatter_seconds(double bytes, int ranks, const Link& l);  // (p-1)(a + n/(p B)); n: the whole input
double pairwise_all_to_all_seconds(double bytes, int ranks, const Link& l);  // (p-1)(a + n/(p B)); n: one rank's send buffer
double send_recv_seconds(double bytes, const Link& l);                       // a + n/B

struct Placement {
  int ranks = 1;       // in the group
  int per_node = 1;    // of them on one node (the rest on other nodes, as many each)
  int sharing = 1;     // groups like it running the same collective at once over a node's link
  int nodes() const { return (ranks + per_node - 1) / per_node; }
};
// The group of `ranks` ranks `stride` apart (a DP group of TP-sized blocks has stride TP) on the
// profile's nodes; the node's other ranks (the stride's) run their own groups at the same time,
// sharing the node's link between nodes.
Placement place_group(const HardwareProfile& hw, int ranks, int stride = 1);

// Over the profile: flat ring inside one node; hierarchical across nodes. The reducing ones add
// the reduction's work, 3 (p - 1) / p of the bytes at memory bandwidth.
double all_reduce_seconds(const HardwareProfile& hw, double bytes, const Placement& g);
double all_reduce_transfer_seconds(const HardwareProfile& hw, double bytes, const Placement& g);  // without it
double all_gather_seconds(const HardwareProfile& hw, double bytes, const Placement& g);
double reduce_scatter_seconds(const HardwareProfile& hw, double bytes, const Placement& g);
double all_to_all_seconds(const HardwareProfile& hw, double bytes, const Placement& g);
double send_recv_seconds(const HardwareProfile& hw, double bytes, bool across_nodes);

// 000 Eq. 2: t'_a2a / t'_FFN = (E - 1) E F / (16 B h), DP + EP with E ranks.
double ppmoe_eq2_a2a_over_ffn(int experts, double flops_per_s, double bytes_per_s, int hidden);
// 000 Eq. 5: t_all-reduce / t_cal = (T - 1) T F / (4 B h), a TP-parallel FFN over T ranks.
double ppmoe_eq5_allreduce_over_calc(int tp, double flops_per_s, double bytes_per_s, int hidden);

}  // namespace moebench
