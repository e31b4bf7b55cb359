#include "comm/ring_reduce_scatter.h"
#include <cstring>
#include <memory>

namespace moebench {

void ring_reduce_scatter(const void* send, void* recv, int block, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  constexpr int kRingTag = 8;  // apart from the communicator's point-to-point tag
  int rank = 0, size = 1, element_bytes = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Type_size(type, &element_bytes);
  const std::size_t bytes = std::size_t(block) * std::size_t(element_bytes);
  const char* own = static_cast<const char*>(send);
  const auto own_part = [&](int b) { return own + std::size_t(((b % size) + size) % size) * bytes; };
  if (bytes == 0) return;
  if (size == 1) {
    std::memcpy(recv, own, bytes);
    return;
  }
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  // Two scratch blocks taking turns: one travels on while the other receives. The last step
  // receives into recv itself.
  const std::unique_ptr<char[]> scratch(new char[2 * bytes]);
  const char* outgoing = own_part(rank - 1);  // block rank - 1 starts its way round here
  for (int step = 1; step < size; ++step) {
    char* incoming = step == size - 1 ? static_cast<char*>(recv) : scratch.get() + std::size_t(step % 2) * bytes;
    MPI_Sendrecv(outgoing, block, type, next, kRingTag, incoming, block, type, previous, kRingTag, comm,
                 MPI_STATUS_IGNORE);
    MPI_Reduce_local(own_part(rank - 1 - step), incoming, block, type, op);
    outgoing = incoming;
  }
}

}  // namespace moebench
