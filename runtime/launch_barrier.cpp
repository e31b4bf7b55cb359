// moebench_launch_barrier: whether the launcher's PMIx barrier waits for every task, as Open MPI
// needs at the end of MPI_Init (scripts/cluster_check.sh runs it first). Open MPI 4.1 ends
// MPI_Init with a PMIx fence that collects no data; its first message may reach a peer only
// after that peer's MPI_Init has set up its receivers. A launcher whose data-less fence ends on
// one node before every node has entered it (Slurm's PMIx tree fence on fewer nodes than its
// TreeWidth, e.g. 22.05 with the default of 50) lets a fast rank's message reach a peer still in
// MPI_Init over TCP, and the peer crashes (SIGSEGV in mca_btl_tcp), now and then.
//   moebench_launch_barrier [--delay S]    (under srun --mpi=pmix or mpirun, 2 tasks or more)
// The job's last task enters the fence S seconds (default 2) after the others; every other task
// must have waited for it. Exit 0 with a line per task; 1 where a task came out early (its line
// says so and what to set); 2 for bad input or no PMIx launcher.
#include <pmix.h>
#include <unistd.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

constexpr const char* kProgram = "moebench_launch_barrier";

int usage_error(const std::string& what) {
  std::fprintf(stderr, "%s: error: %s\n", kProgram, what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  double delay = 2.0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--delay" && i + 1 == argc) return usage_error("--delay: needs a value (seconds from 0.5 to 60)");
    if (arg == "--delay") {
      char* end = nullptr;
      delay = std::strtod(argv[++i], &end);
      if (!end || *end || !(delay >= 0.5 && delay <= 60))
        return usage_error(std::string("--delay: '") + argv[i] + "'; allowed: seconds from 0.5 to 60");
    } else {
      return usage_error("unknown option '" + arg + "'; allowed: --delay S");
    }
  }
  pmix_proc_t me;
  if (PMIx_Init(&me, nullptr, 0) != PMIX_SUCCESS)
    return usage_error("no PMIx server to talk to: start it under srun --mpi=pmix or mpirun");
  pmix_proc_t job;
  PMIX_PROC_CONSTRUCT(&job);
  PMIX_LOAD_NSPACE(job.nspace, me.nspace);
  job.rank = PMIX_RANK_WILDCARD;
  pmix_value_t* value = nullptr;
  std::uint32_t tasks = 0;
  if (PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &value) == PMIX_SUCCESS && value) {
    tasks = value->data.uint32;
    PMIX_VALUE_RELEASE(value);
  }
  if (tasks < 2) {
    PMIx_Finalize(nullptr, 0);
    return usage_error("the job has " + std::to_string(tasks) + " task(s); a barrier needs 2 or more");
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::uint32_t late = tasks - 1;
  if (me.rank == late) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
  const auto start = std::chrono::steady_clock::now();
  // No data, as the fence that ends Open MPI's MPI_Init.
  const pmix_status_t fenced = PMIx_Fence(nullptr, 0, nullptr, 0);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int rc = 0;
  if (fenced != PMIX_SUCCESS) {
    std::printf("%s: task %u on %s: error: the fence failed (%s)\n", kProgram, me.rank, host, PMIx_Error_string(fenced));
    rc = 1;
  } else if (me.rank != late && waited < delay / 2) {
    std::printf("%s: task %u on %s: error: the barrier ended after %.3f s, before task %u entered it (%.1f s after this "
                "one): the launcher's data-less fence does not wait for every node, and Open MPI's ranks can crash in "
                "MPI_Init; under Slurm set SLURM_PMIX_FENCE=ring (or PMIxCollFence=ring in mpi.conf)\n",
                kProgram, me.rank, host, waited, late, delay);
    rc = 1;
  } else {
    std::printf("%s: task %u on %s: ok (waited %.3f s%s)\n", kProgram, me.rank, host, waited,
                me.rank == late ? ", the late one" : " for the late one");
  }
  std::fflush(stdout);
  PMIx_Finalize(nullptr, 0);
  return rc;
}
