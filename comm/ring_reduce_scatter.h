// Reduce-scatter over MPI as a ring, the way NCCL runs it on GPUs: p - 1 steps, in each of
// which a rank sends one block's partial reduction to the next rank, receives another from the
// previous one and adds its own part of that block (MPI_Reduce_local, so that MPI's user ops --
// the 16-bit sums -- apply as in MPI's collectives). Each rank sends and receives (p - 1) / p
// of the buffer, the least a reduce-scatter can move. Block b's terms are added in ring order:
// rank b + 1's first, then b + 2's, ..., rank b's last (ranks mod p).
#pragma once
#include <mpi.h>

namespace moebench {

// send holds p blocks of `block` elements of `type`; recv receives the reduction of block
// rank(). Collective over `comm`; recv must not overlap send.
void ring_reduce_scatter(const void* send, void* recv, int block, MPI_Datatype type, MPI_Op op, MPI_Comm comm);

}  // namespace moebench
