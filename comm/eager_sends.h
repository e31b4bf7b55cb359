// Point-to-point sends that complete once copied, as NCCL's do while a message fits in the
// buffer NCCL holds at its peer (the NCCL order's small sends, comm/nccl_order.h): the bytes
// are copied, sent from the copy with MPI_Isend, and a progress thread tests the sends until
// their receives have taken them, so neither rank has to be inside MPI for the message to move.
#pragma once
#include <cstddef>
#include <mpi.h>

namespace moebench {

// `count` elements of `type`, `bytes` in all.
void eager_send(const void* buf, int count, MPI_Datatype type, std::size_t bytes, int peer, int tag, MPI_Comm comm);
// Waits, under the watchdog, until every eager send on `comm` has been received (before the
// communicator is freed).
void drain_eager_sends(MPI_Comm comm);

}  // namespace moebench
