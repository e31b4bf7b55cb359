#include "runtime/launcher_check.h"
#include <cstdio>
#include <cstdlib>
#include <string>
#if MOEBENCH_WITH_MPI
#include <mpi.h>
#endif

namespace moebench {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// The step's task count when srun itself started this process (not mpirun inside a job, whose
// ranks carry Open MPI's own variables); 0 otherwise.
int srun_tasks() {
  const char* tasks = env("SLURM_STEP_NUM_TASKS");
  if (!tasks || env("OMPI_COMM_WORLD_SIZE")) return 0;
  return std::atoi(tasks);
}

// One line for the whole step: from its first task only.
bool first_task() {
  const char* id = env("SLURM_PROCID");
  return !id || std::atoi(id) == 0;
}

}  // namespace

void refuse_srun_without_pmi(const std::string& program) {
  const int tasks = srun_tasks();
  if (tasks <= 1 || env("PMIX_RANK") || env("PMI_RANK") || env("PMI_FD")) return;
  if (first_task())
    std::fprintf(stderr,
                 "%s: error: srun started %d tasks without PMI, so MPI cannot make them one job; launch with "
                 "`srun --mpi=pmix` (or set MpiDefault=pmix in slurm.conf)\n",
                 program.c_str(), tasks);
  std::exit(2);
}

void refuse_world_unlike_srun(const std::string& program, int world) {
  const int tasks = srun_tasks();
  if (tasks == 0 || tasks == world) return;
  if (first_task())
    std::fprintf(stderr,
                 "%s: error: MPI's world has %d rank(s) but srun started %d tasks (SLURM_NTASKS): the MPI library "
                 "does not take its ranks from this srun's PMI; launch with `srun --mpi=pmix` and an MPI built with "
                 "PMIx, or with mpirun\n",
                 program.c_str(), world, tasks);
#if MOEBENCH_WITH_MPI
  MPI_Finalize();
#endif
  std::exit(2);
}

}  // namespace moebench
