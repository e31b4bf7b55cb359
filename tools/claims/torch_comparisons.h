// PyTorch beside us: every comparison of ours with PyTorch a results folder holds (each CSV with a
// speed_vs_torch column, CPU and GPU), in one convention -- PyTorch's time over ours, so above 1
// means ours is faster -- with the variant of PyTorch that ran (eager, SDPA, compiled,
// grouped_mm), its version and device, and the rows where none could run, with why.
#pragma once
#include <string>

namespace moebench {

// REPORT.md's section, from the CSVs under `results` (relative paths in its text), but for the
// archives of past GPU leases (cuda/lease_*).
std::string torch_comparisons_section(const std::string& results);

}  // namespace moebench
