// A launch that cannot give the job its ranks is refused before any work, with exit code 2 and
// one line from the launcher's first task. Under Slurm's srun, Open MPI finds its ranks only
// through PMIx (`srun --mpi=pmix`); without it, it prints a screen-long banner, and another MPI
// starts every task as rank 0 of 1. So: a task of an srun step of several tasks that has no
// PMI in its environment is refused before MPI starts, and a rank whose world size differs from
// the step's task count is refused once MPI has started.
#pragma once
#include <string>

namespace moebench {

// Before MPI_Init: exits 2 if srun started this task in a step of several tasks without PMI.
void refuse_srun_without_pmi(const std::string& program);
// After MPI_Init: exits 2 (after MPI_Finalize) if srun started this step with a task count
// other than `world`.
void refuse_world_unlike_srun(const std::string& program, int world);

}  // namespace moebench
