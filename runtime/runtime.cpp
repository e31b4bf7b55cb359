#include "runtime/runtime.h"
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <unistd.h>
#include "runtime/launcher_check.h"
#include "runtime/peer_probe.h"
#include "runtime/watchdog.h"
#if MOEBENCH_WITH_MPI
#include <mpi.h>
#endif

namespace moebench {

namespace {

// `line` on stderr in one write, after what stdout holds: std::cerr writes each << apart, and in
// a pipe the ranks' and this rank's stdout share, the pieces of the line would interleave.
void say_whole(const std::string& line) {
  std::cout.flush();
  std::fflush(stdout);
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(2, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += std::size_t(n);
  }
}

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// The kernel's boot id: the same for every namespace of one machine (its hostname may not be).
std::string this_machine() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (in >> id && !id.empty()) return id;
  return this_host();
}

}  // namespace


static Runtime* g_runtime = nullptr;

Runtime* Runtime::current() { return g_runtime; }

bool Runtime::has_mpi() const { return owns_mpi_; }

Runtime::Runtime(int& argc, char**& argv, std::string program) : program_(std::move(program)) {
#if MOEBENCH_WITH_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    refuse_srun_without_pmi(program_);
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    owns_mpi_ = true;
    // Communication runs on stream worker threads, beside the host's own MPI calls.
    if (provided < MPI_THREAD_MULTIPLE) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (rank == 0)
        std::cerr << program_ << ": error: the MPI library provides thread level " << provided
                  << ", moebench needs MPI_THREAD_MULTIPLE (" << MPI_THREAD_MULTIPLE
                  << ": communication runs on stream worker threads); use an MPI built with thread support" << std::endl;
      MPI_Finalize();
      std::exit(2);
    }
  }
  // A failed MPI call aborts the whole job rather than returning to one rank.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_);
  if (owns_mpi_) refuse_world_unlike_srun(program_, world_);
  Watchdog::set_identity(program_.c_str(), rank_);  // before the first wait it may end
  MPI_Comm node;
  {
    Watchdog::Scope watch("the split of the ranks by node (MPI_Comm_split_type)");
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  }
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
#else
  (void)argc;
  (void)argv;
  Watchdog::set_identity(program_.c_str(), rank_);
#endif
  g_runtime = this;
  // Who runs where, and how each rank answers the watchdog's probe (runtime/peer_probe.h).
  const std::string probe = world_ > 1 ? PeerProbe::listen() : "";
  const std::vector<std::string> who = gather(this_host() + "\n" + this_machine() + "\n" + probe);
  std::map<std::string, int> per_machine;
  std::vector<PeerAddress> peers;
  for (int r = 0; r < int(who.size()); ++r) {
    std::istringstream in(who[std::size_t(r)]);
    std::string host, machine, address;
    std::getline(in, host);
    std::getline(in, machine);
    std::getline(in, address);
    hosts_.push_back(host);
    ranks_per_machine_ = std::max(ranks_per_machine_, ++per_machine[machine]);
    peers.push_back(PeerProbe::parse(r, host, address));
  }
  if (world_ > 1) PeerProbe::set_peers(rank_, std::move(peers));
}

int Runtime::nodes() const { return int(std::set<std::string>(hosts_.begin(), hosts_.end()).size()); }

std::vector<std::string> Runtime::gather(const std::string& text) const {
#if MOEBENCH_WITH_MPI
  if (world_ > 1) {
    Watchdog::Scope watch("an exchange of text between ranks (MPI_Allgather)");
    int length = int(text.size());
    std::vector<int> lengths(static_cast<std::size_t>(world_)), offsets(static_cast<std::size_t>(world_));
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < world_; ++r) offsets[std::size_t(r)] = std::exchange(total, total + lengths[std::size_t(r)]);
    std::string all(std::size_t(total), '\0');
    MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                   MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int r = 0; r < world_; ++r) out.push_back(all.substr(std::size_t(offsets[std::size_t(r)]), std::size_t(lengths[std::size_t(r)])));
    return out;
  }
#endif
  return {text};
}

Runtime::~Runtime() {
  if (g_runtime == this) g_runtime = nullptr;
#if MOEBENCH_WITH_MPI
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_mpi_ && !finalized) {
    Watchdog::Scope watch("the end of MPI (MPI_Finalize), which waits for every rank");
    MPI_Finalize();
  }
#endif
}

bool Runtime::any(bool flag) const {
#if MOEBENCH_WITH_MPI
  int local = flag ? 1 : 0, global = 0;
  Watchdog::Scope watch("an agreement between ranks (MPI_Allreduce)");
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return global != 0;
#else
  return flag;
#endif
}

double Runtime::max(double v) const {
#if MOEBENCH_WITH_MPI
  double out = v;
  Watchdog::Scope watch("the slowest-rank time (MPI_Allreduce)");
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
#else
  return v;
#endif
}

std::int64_t Runtime::sum(std::int64_t v) const {
#if MOEBENCH_WITH_MPI
  std::int64_t out = v;
  Watchdog::Scope watch("a sum over ranks (MPI_Allreduce)");
  MPI_Allreduce(&v, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return out;
#else
  return v;
#endif
}

void Runtime::sum(std::vector<double>& v) const {
#if MOEBENCH_WITH_MPI
  if (v.empty()) return;
  Watchdog::Scope watch("a sum over ranks (MPI_Allreduce)");
  MPI_Allreduce(MPI_IN_PLACE, v.data(), int(v.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
  (void)v;
#endif
}

void Runtime::agree_or_exit(const std::optional<std::string>& error) {
  int reporter = error ? rank_ : world_;
#if MOEBENCH_WITH_MPI
  int lowest = reporter;
  Watchdog::Scope watch("the check of the options on every rank (MPI_Allreduce)");
  MPI_Allreduce(&reporter, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  reporter = lowest;
#endif
  if (reporter == world_) return;
  if (reporter == rank_) {
    say_whole(program_ + ": error: " + *error + "\n");
  }
#if MOEBENCH_WITH_MPI
  if (owns_mpi_) MPI_Finalize();
#endif
  std::exit(2);
}

void Runtime::abort_job(const std::string& message, int code) const {
  say_whole(program_ + ": rank " + std::to_string(rank_) + ": error: " + message + "\n");
#if MOEBENCH_WITH_MPI
  if (world_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

void fatal(const std::string& message, int code) {
  if (g_runtime) g_runtime->abort_job(message, code);
  say_whole("moebench: error: " + message + "\n");
  std::exit(code);
}

}  // namespace moebench
