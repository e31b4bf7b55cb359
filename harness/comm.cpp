// Choosing the world communicator for a backend.
#include "harness/comm.h"
#include "harness/runtime.h"

namespace moebench {

std::size_t bytes_of(std::size_t count, DType t) {
  const std::size_t es = dtype_size(t);
  if (count > SIZE_MAX / es) throw Error("element count " + std::to_string(count) + " overflows a byte size");
  return count * es;
}

std::unique_ptr<Communicator> make_world_communicator(const Runtime& rt, Backend backend, double timeout_s) {
  if (backend == Backend::cuda) {
#if MOEBENCH_WITH_CUDA
    return make_nccl_communicator(rt, timeout_s);
#else
    (void)timeout_s;
    cuda_not_built("NCCL communicator");
#endif
  }
#if MOEBENCH_WITH_MPI
  if (rt.has_mpi() || rt.world() > 1) return make_mpi_communicator();
#endif
  if (rt.world() > 1) throw Error("the cpu backend needs MPI for more than one rank; this build has none");
  return make_self_communicator();
}

}  // namespace moebench
