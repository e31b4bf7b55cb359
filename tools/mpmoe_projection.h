// MPMoE's figures (003 Figs. 10, 11, 14, 15, 17) and its search's cost (Sec. 4.1) projected on the Adira and Valor profiles: the
// pipelined layer's forward and backward from MPMoE's own performance model
// (models/mpmoe_perf_model.h), fed with per-part operation times from the hardware profile --
// the all-to-alls from the collective model, the experts' GEMMs at the profile's efficiency, the
// offloads over PCIe, the streams slowing each other by the profile's overlap_slowdown -- instead
// of this suite's measured speed fits. Modelled, not measured.
#pragma once
#include <string>
#include "models/hardware_profile.h"
#include "models/mpmoe_perf_model.h"
#include "tools/projection.h"

namespace moebench {

struct MoELayerRun {
  int hidden = 0, ffn = 0;
  int gpus = 0;               // expert-parallel ranks, one expert each (E = N)
  int tokens = 0;             // B per GPU
  bool half = true;
};

// One part's operations, each alone (ms), for a layer cut into `parts`.
PartCosts mpmoe_part_costs(const MoELayerRun& r, int parts, const HardwareProfile& hw);
// Forward + backward (ms) of the pipelined layer: n parts, memory reuse "none" or S1..S4.
double mpmoe_layer_ms(const MoELayerRun& r, int parts, const std::string& strategy, const HardwareProfile& hw);

using MPMoEChoice = GranularityChoice;
// The model's best (n, strategy) over n = 1..max_parts and S1..S4 (MPMoE-pm's choice).
MPMoEChoice mpmoe_best(const MoELayerRun& r, const HardwareProfile& hw, int max_parts = 16);
// FastMoE (no split, no overlap) and FasterMoE (split by worker group, one per node, no reuse).
double fastmoe_ms(const MoELayerRun& r, const HardwareProfile& hw);
double fastermoe_ms(const MoELayerRun& r, const HardwareProfile& hw);

// On one cluster (a CSV holds one machine's rows): Adira's 64 GPUs, Valor's 16.
ProjectedTable project_mpmoe_f10(const HardwareProfile& hw, const std::string& cluster, int gpus);
ProjectedTable project_mpmoe_f11(const HardwareProfile& adira);
ProjectedTable project_mpmoe_f14(const HardwareProfile& adira);
ProjectedTable project_mpmoe_f15(const HardwareProfile& adira);
ProjectedTable project_mpmoe_f17(const HardwareProfile& adira);
// 003 Sec. 4.1: Algorithm 1 (moe/granularity_search.h) against an exhaustive search over n = 2..8,
// on the model's GPT-XL layer times at 64 GPUs, over the Bs a training run meets (every
// kSearchBStep tokens per GPU up to 32k, asked in a shuffled order), per memory reuse strategy:
// how many points each profiles, whether Algorithm 1 finds the exhaustive search's n, and the
// share of Bs whose time over n is parabola-like.
inline constexpr int kSearchBStep = 256;
ProjectedTable project_mpmoe_search(const HardwareProfile& adira);

}  // namespace moebench
