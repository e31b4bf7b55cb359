// What moebench_moe_layer writes for one dispatcher: moe/layer_<dispatcher>.csv, its row from the
// dispatcher's run record (the time and its ranges, each exchange's fastest rank, the overhead
// over the layer's own expert GEMMs and its verdict, load, memory, PyTorch's layer beside the
// one-device row, the roofline, whether each rank had a core: where they share fewer, the
// phases' split is the machine's), and the console lines that sum it up.
#pragma once
#include <optional>
#include <string>
#include <vector>
#include "bench/moe_options.h"
#include "harness/bench.h"
#include "harness/torch_reference.h"
#include "models/roofline.h"

namespace moebench {

inline const std::vector<std::string> kLayerRanges = {"moe.gating",       "moe.dispatch",    "moe.expert",
                                                      "moe.combine",      "moe.combine.bwd", "moe.expert.bwd",
                                                      "moe.dispatch.bwd", "moe.gating.bwd",  "moe.sync.bwd",
                                                      "moe.gate_sync.bwd"};
// The exchanges' phases, also written as their fastest rank's time (harness/layer_case.h's
// PhasesOverRanks): the exchange without the wait for the slowest peer's compute before it.
inline const std::vector<std::string> kExchangeRanges = {"moe.dispatch", "moe.combine", "moe.combine.bwd",
                                                         "moe.dispatch.bwd"};
inline const std::string kFastestRank = ".fastest_rank";  // the counter's suffix
inline constexpr double kOverheadTarget = 1.15;  // the layer over its own expert GEMMs

struct LayerCsvRun {
  std::string dispatcher;
  const MoEOptions& moe;
  std::string popularity;
  const RooflineProfile& roofline;
  const std::optional<TorchRun>& torch;  // PyTorch's fastest layer (--reference), or none
  bool has_reference = false;            // --reference was given
};

// Writes <out>/moe/layer_<dispatcher>.csv and prints its summary.
void write_layer_csv(const std::string& out_dir, const Provenance& provenance, const RunRecord& r, const LayerCsvRun& run);

}  // namespace moebench
