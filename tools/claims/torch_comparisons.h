// PyTorch beside us: every comparison of ours with PyTorch a results folder holds (each CSV with a
// speed_vs_torch column, CPU and GPU), in one convention -- PyTorch's time over ours, so above 1
// means ours is faster -- with the variant of PyTorch that ran (eager, SDPA, compiled,
// grouped_mm), its version and device, whether a GPU row is of this machine's code (the ledger's
// rule, gpu_evidence.h), and the rows where none could run, with why.
#pragma once
#include <functional>
#include <string>
#include "tools/claims/gpu_evidence.h"

namespace moebench {

// REPORT.md's section, from the CSVs under `results` (relative paths in its text), but for the
// archives of past GPU leases (cuda/lease_*). `stale`: why a GPU row's run may not stand beside
// this machine's results, or "" where it may.
std::string torch_comparisons_section(const std::string& results,
                                      const std::function<std::string(const RunOrigin&)>& stale);

}  // namespace moebench
