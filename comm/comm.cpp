// Choosing the world communicator for a backend.
#include <algorithm>
#include "comm/comm.h"
#include "runtime/runtime.h"

namespace moebench {

std::size_t bytes_of(std::size_t count, DType t) {
  const std::size_t es = dtype_size(t);
  if (count > SIZE_MAX / es) throw Error("element count " + std::to_string(count) + " overflows a byte size");
  return count * es;
}

void check_all_to_all_v(int ranks, const std::vector<std::size_t>& sc, const std::vector<std::size_t>& sd,
                        const std::vector<std::size_t>& rc, const std::vector<std::size_t>& rd) {
  const std::size_t n = static_cast<std::size_t>(ranks);
  if (sc.size() != n || sd.size() != n || rc.size() != n || rd.size() != n)
    throw Error("all_to_all_v: counts and displacements need one entry per rank (" + std::to_string(n) + ")");
}

std::chrono::steady_clock::time_point EmulatedLink::book(std::chrono::steady_clock::time_point start,
                                                         double bus_bytes) const {
  const auto wire = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(bus_bytes / (bandwidth_GBps * 1e9)));
  const auto latency = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(latency_us * 1e-6));
  std::lock_guard<std::mutex> lock(clock->mutex);
  clock->busy_until = std::max(start, clock->busy_until) + wire;
  return clock->busy_until + latency;
}

std::string EmulatedLink::describe() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "emulated: %g GB/s, %g us", bandwidth_GBps, latency_us);
  return buf;
}

std::unique_ptr<Communicator> make_world_communicator(const Runtime& rt, Backend backend,
                                                      const std::optional<EmulatedLink>& link) {
  if (backend == Backend::cuda) {
    if (link) throw Error("--link-bandwidth: an emulated link is a cpu-backend setting; NCCL's links are real");
#if MOEBENCH_WITH_CUDA
    return make_nccl_communicator(rt);
#else
    cuda_not_built("NCCL communicator");
#endif
  }
#if MOEBENCH_WITH_MPI
  if (rt.has_mpi() || rt.world() > 1) return make_mpi_communicator(link);
#endif
  if (rt.world() > 1) throw Error("the cpu backend needs MPI for more than one rank; this build has none");
  if (link) throw Error("--link-bandwidth: an emulated link needs MPI; this build has none");
  return make_self_communicator();
}

}  // namespace moebench
