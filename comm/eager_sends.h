// Point-to-point sends that complete once copied, as NCCL's do while a message fits in the
// buffer NCCL holds at its peer (the NCCL order's sends, comm/nccl_order.h): the bytes are
// copied, sent from the copy with MPI_Isend, and a progress thread tests the sends until their
// receives have taken them, so neither rank has to be inside MPI for the message to move. The
// buffer is the connection's, shared by consecutive sends: a send waits until the bytes sent
// before it and not yet received leave room for its own.
#pragma once
#include <cstddef>
#include <mpi.h>
#include <vector>

namespace moebench {

// `count` elements of `type`, `bytes` in all, at most `capacity` (the connection's buffer).
// Blocks, under the watchdog, until the connection to `peer` has room for them.
void eager_send(const void* buf, int count, MPI_Datatype type, std::size_t bytes, std::size_t capacity, int peer,
                int tag, MPI_Comm comm);
// Waits, under the watchdog, until every eager send on `comm` has been received (before the
// communicator is freed).
void drain_eager_sends(MPI_Comm comm);
// The buffer of each rank's connection from this one on `comm` (collective over `comm`): NCCL's
// within a node for the ranks that share this one's node, between nodes for the others, or
// MOEBENCH_MPI_AS_NCCL_EAGER_BYTES where it is set.
std::vector<std::size_t> connection_bytes(MPI_Comm comm);

}  // namespace moebench
