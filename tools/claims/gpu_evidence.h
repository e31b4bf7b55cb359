// Whether a GPU run's CSVs may judge claims beside this machine's results: the ledger takes GPU
// evidence only from a committed tree, of the same measured code as this machine's runs (no file
// under kMeasuredCode changed between the two commits, as git tells in the checkout the ledger
// belongs to) and at most kMaxEvidenceDays apart. Otherwise the GPU number is shown with the
// reason and the claim is judged without it.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace moebench {

inline constexpr int kMaxEvidenceDays = 14;
// The folders and files that shape a measurement: the code it runs, the experiment scripts that
// set its sizes and repetitions, and the build's settings (git pathspecs; docs and tools do not
// enter a number).
const std::vector<std::string>& measured_code_folders();

struct RunOrigin {
  std::string commit;   // as the CSV's provenance has it ("-dirty" for an uncommitted tree)
  std::string date;     // ISO 8601, UTC
  std::string backend;  // cpu, cuda, or model (a projection, not a run)
  std::string scale;    // tiny, local or paper
};

// Why the GPU run `gpu` may not judge beside this machine's `local` run, or nothing. `repo`: a
// folder inside the git checkout whose history names both commits. Answers are cached per pair.
std::optional<std::string> stale_gpu_evidence(const std::string& repo, const RunOrigin& gpu, const RunOrigin& local);

}  // namespace moebench
