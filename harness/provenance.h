// Provenance of a run: what produced a CSV row (backend, device, versions, ranks, commit, date).
#pragma once
#include <string>
#include "harness/csv.h"
#include <vector>
#include "runtime/device.h"
#include "runtime/runtime.h"

namespace moebench {

// Collective: every rank's device and driver are gathered, and a run over several nodes names
// them and the link within and between them.
Provenance make_provenance(const Runtime& rt, const Device& device, const std::string& link, const std::string& dtype,
                           const std::string& scale);
// The link cell of a run over `nodes` hosts that measured `link`: on several nodes the network
// within and between them (MOEBENCH_NODE_LINK where the cluster says what it is).
std::string link_over_nodes(const std::string& link, int nodes);
// One cell for every rank's value: the value where all agree, else "mixed: A (ranks 0-3), B (ranks 4-7)".
std::string agreed_or_mixed(const std::vector<std::string>& per_rank);
// The hosts cell: each host once, in rank order, space-separated.
std::string hosts_cell(const std::vector<std::string>& per_rank);
// `git describe --always --dirty` of the source tree, or MOEBENCH_COMMIT, or "unknown".
std::string source_commit();
std::string utc_now_iso8601();

}  // namespace moebench
