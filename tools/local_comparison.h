// The models against this machine's own runs, read back from the benches' CSVs.
#pragma once
#include <string>
#include "tools/projection.h"

namespace moebench {

// The models against this machine's own runs: every collective of results/comm, every row of
// ppmoe.t2 (over MPI and the emulated link) and of m6t.t1, predicted from `hw` (this machine's
// profile, written by moebench_profile) beside what was measured, with the error of each and
// their mean and worst. A results file that is missing is named in the summary, not an error.
ProjectedTable compare_local_runs(const HardwareProfile& hw, const std::string& results_dir);
// ppmoe.eq: 000 Eq. 2 (t_a2a / t_FFN) and Eq. 5 (t_all-reduce / t_cal) with this machine's
// profile (F: its GEMM peak, B: its link) beside the same ratios measured in ppmoe.t1 (DPMoE) and
// ppmoe.t3 (PPMoE) and predicted by the collective and step models.
ProjectedTable ppmoe_equations_local(const HardwareProfile& hw, const std::string& results_dir);

}  // namespace moebench
