// One communicator interface, three implementations: MPI (CPU buffers), NCCL (GPU buffers,
// bootstrapped over MPI) and Self (a world of one, for builds without MPI). Counts are in
// elements of `t`. Calls are enqueued on `s` and run in its order (on a CPU stream, on its
// worker thread: communication on one stream overlaps computation on another); wait(s)
// completes them and is where an asynchronous failure or a hang becomes an error. One
// communicator runs one operation at a time: two collectives in flight at once (MPMoE's
// dispatch and combine of different micro-batches) need two communicators, see dup().
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include "runtime/device.h"
#include "kernels/dtype.h"

namespace moebench {

class Runtime;

enum class ReduceOp { sum, max };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string kind() const = 0;  // "mpi", "nccl", "self"
  // What the bytes travel over, for provenance: "measured: ..." or "emulated: <GB/s>, <us>".
  virtual std::string link() const = 0;

  // Block p of `send` (count elements) goes to rank p; block p of `recv` comes from rank p.
  virtual void all_to_all(const void* send, void* recv, std::size_t count, DType t, const Stream& s) = 0;
  // Per-peer counts and displacements, in elements.
  virtual void all_to_all_v(const void* send, const std::vector<std::size_t>& send_counts,
                            const std::vector<std::size_t>& send_displs, void* recv,
                            const std::vector<std::size_t>& recv_counts, const std::vector<std::size_t>& recv_displs,
                            DType t, const Stream& s) = 0;
  virtual void all_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op, const Stream& s) = 0;
  // recv holds size() blocks of `count`, block p from rank p.
  virtual void all_gather(const void* send, void* recv, std::size_t count, DType t, const Stream& s) = 0;
  // send holds size() blocks of `recv_count`; this rank receives the reduction of block rank().
  virtual void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t, ReduceOp op,
                              const Stream& s) = 0;
  virtual void send(const void* buf, std::size_t count, DType t, int peer, const Stream& s) = 0;
  virtual void recv(void* buf, std::size_t count, DType t, int peer, const Stream& s) = 0;
  // Sends to `dst` and receives from `src` at once (no deadlock in a ring).
  virtual void send_recv(const void* send, int dst, void* recv, int src, std::size_t count, DType t,
                         const Stream& s) = 0;
  virtual void barrier(const Stream& s) = 0;
  // Completes everything enqueued on `s` by this communicator.
  virtual void wait(const Stream& s) = 0;
  // Collective: ranks with the same colour form a sub-group, ordered by key.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Collective: the same ranks in a new communicator, whose operations may be in flight at
  // the same time as this one's (on another stream).
  virtual std::unique_ptr<Communicator> dup() = 0;
};

// An interconnect emulated on top of MPI on one machine: every operation completes no
// earlier than latency + bus bytes / bandwidth after it starts (nccl-tests' bus bytes of the
// collective), waiting asleep, so a 2-core machine can be put in a cluster's regime. The
// communicators made from one link (dup, split) share it as the collectives of one NIC do:
// operations in flight at once take their turns on the wire (MPMoE's S and R of different
// parts on two communicators share the bandwidth, they do not each get all of it).
struct LinkClock {
  std::mutex mutex;
  std::chrono::steady_clock::time_point busy_until{};
};
struct EmulatedLink {
  double bandwidth_GBps = 0;  // > 0
  double latency_us = 0;      // >= 0
  std::shared_ptr<LinkClock> clock = std::make_shared<LinkClock>();
  std::string describe() const;
  // Seconds the link needs for `bus_bytes`.
  double seconds(double bus_bytes) const { return latency_us * 1e-6 + bus_bytes / (bandwidth_GBps * 1e9); }
  // Books the wire for an operation of `bus_bytes` that starts at `start`, after what is booked
  // already; returns when the operation completes.
  std::chrono::steady_clock::time_point book(std::chrono::steady_clock::time_point start, double bus_bytes) const;
};

// The communicator over all ranks for a backend: MPI for cpu (Self without MPI at world 1),
// NCCL for cuda. Throws Error when the combination cannot work.
// Every wait of its operations has the watchdog's timeout (Watchdog::set_timeout, --comm-timeout).
// `link`: an emulated interconnect for the MPI communicator (cpu only).
std::unique_ptr<Communicator> make_world_communicator(const Runtime& rt, Backend backend,
                                                      const std::optional<EmulatedLink>& link = std::nullopt);

std::unique_ptr<Communicator> make_self_communicator();
// The world of `ranks` ranks a launch would make, as rank 0 sees it before the launch: its size
// for checking a bench's options (--check-options); every operation throws Error.
std::unique_ptr<Communicator> make_unlaunched_world(int ranks);
#if MOEBENCH_WITH_MPI
std::unique_ptr<Communicator> make_mpi_communicator(const std::optional<EmulatedLink>& link = std::nullopt);
#endif
#if MOEBENCH_WITH_CUDA
std::unique_ptr<Communicator> make_nccl_communicator(const Runtime& rt);
std::string nccl_version();
#endif

// Bytes of `count` elements, with an overflow check.
std::size_t bytes_of(std::size_t count, DType t);
// Throws Error unless all_to_all_v's counts and displacements have one entry per rank.
void check_all_to_all_v(int ranks, const std::vector<std::size_t>& send_counts, const std::vector<std::size_t>& send_displs,
                        const std::vector<std::size_t>& recv_counts, const std::vector<std::size_t>& recv_displs);

}  // namespace moebench
