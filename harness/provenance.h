// Provenance of a run: what produced a CSV row (backend, device, versions, ranks, commit, date).
#pragma once
#include <string>
#include "harness/csv.h"
#include "runtime/device.h"

namespace moebench {

Provenance make_provenance(const Device& device, int ranks, const std::string& link, const std::string& dtype,
                           const std::string& scale);
// `git describe --always --dirty` of the source tree, or MOEBENCH_COMMIT, or "unknown".
std::string source_commit();
std::string utc_now_iso8601();

}  // namespace moebench
