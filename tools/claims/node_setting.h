// The two-level network as a setting of the ledger (experiments/nodes/run.sh): claims that rest
// on the split between a node's fast links and the slower network between nodes are judged from
// runs over two nodes (RESULTS/nodes/...), never from the flat network of one host; where the run
// could not make the nodes, nodes/setting.csv says why and those claims say "not measured here".
// Their verdicts at half and at twice the link's rate (RESULTS/nodes_half/, nodes_twice/) show
// how much the rate decides.
#pragma once
#include <optional>
#include <string>
#include <vector>
#include "tools/claims/ledger.h"

namespace moebench {

// The folder the setting's runs write, and those of its sensitivity runs.
inline constexpr const char* kNodesFolder = "nodes/";

// Why RESULTS has no runs over two nodes ("not measured here: ..."), or nothing where it has.
std::optional<std::string> nodes_not_measured(const std::string& results);

// Whether a CSV's `nodes` cell says its ranks ran on several hosts.
bool several_nodes(const std::string& nodes_cell);

struct RateSensitivity {
  std::string claim;
  std::string rate[3];     // GB/s: half, the setting's, twice
  std::string verdict[3];  // "" where that run is not there
  std::string value[3];
};

// For each claim judged from the setting's runs, its number and verdict at each rate.
std::vector<RateSensitivity> rate_sensitivity(const std::vector<ClaimSpec>& specs, const std::string& results);

// The report's section on the setting: how the rate was set, and the table above.
std::string node_setting_section(const std::vector<ClaimSpec>& specs, const std::string& results);

}  // namespace moebench
