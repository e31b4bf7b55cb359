// Process bootstrap: MPI (when built with it) gives rank, world size and the local rank that
// picks the GPU; without MPI the world is one process. Owns the two ways a run can end badly:
// a usage error every rank agrees on (one line, exit 2 everywhere) and a failure on any one
// rank (its message, then the whole job is aborted so no rank hangs). Its collectives run
// under the watchdog, so a stopped peer ends the job after --comm-timeout instead of hanging it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moebench {

class Runtime {
 public:
  Runtime(int& argc, char**& argv, std::string program);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // Each rank's hostname, in rank order; the number of distinct hosts (nodes); and the most ranks
  // that share one physical machine, found by the kernel's boot id: namespaced nodes of one
  // machine have hostnames of their own but share its cores.
  const std::vector<std::string>& hosts() const { return hosts_; }
  int nodes() const;
  int ranks_per_machine() const { return ranks_per_machine_; }
  // Collective: every rank's `text`, in rank order.
  std::vector<std::string> gather(const std::string& text) const;
  bool has_mpi() const;
  const std::string& program() const { return program_; }

  // Collective. If any rank passes an error, the lowest such rank prints it as
  // "<program>: error: <message>" and every rank exits with code 2.
  void agree_or_exit(const std::optional<std::string>& error);
  // Collective: true if `flag` is true on any rank.
  bool any(bool flag) const;
  // Collective reductions over all ranks, for reporting (host values).
  double max(double v) const;
  std::int64_t sum(std::int64_t v) const;
  // Element-wise sum over all ranks, in place (every rank passes the same length).
  void sum(std::vector<double>& v) const;

  // Not collective: prints "<program>: rank R: error: <message>" and ends every rank of the job.
  [[noreturn]] void abort_job(const std::string& message, int code = 1) const;

  // The runtime of this process, once constructed (for abort paths deep in the code).
  static Runtime* current();

 private:
  std::string program_;
  int rank_ = 0, world_ = 1, local_rank_ = 0, local_size_ = 1, ranks_per_machine_ = 1;
  std::vector<std::string> hosts_;
  bool owns_mpi_ = false;
};

// Ends the job from anywhere: through the runtime when there is one, else exit(code).
[[noreturn]] void fatal(const std::string& message, int code = 1);

}  // namespace moebench
