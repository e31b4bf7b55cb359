// NCCL's ordering, imitated by the MPI communicator on the CPU ranks, so that what deadlocks on
// NCCL deadlocks here too (MOEBENCH_MPI_AS_NCCL=1; on in the test suites). NCCL runs the
// operations of one communicator one at a time, in the order the host issued them, whatever
// stream issued each; MPI on CPU threads lets operations on two streams pass each other. In the
// mode every operation of a communicator takes a ticket when the host issues it (or launches a
// graph that captured it) and runs once every earlier ticket of that communicator has
// completed. A pair of ranks is connected at its first send and receive: the host that issues
// either blocks until the peer has issued its side (NCCL's runtime connect). Over a connection,
// sends complete once copied while the bytes not yet received fit in the buffer NCCL holds at
// the peer (comm/eager_sends.h); a send that does not fit completes once its receive has started.
// The mode also records which streams issued each communicator's operations, and which
// communicators each stream carried: a communicator used from several streams, or a stream
// carrying several communicators, is where an order of issue can deadlock, and the tests list them.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace moebench {

// NCCL's buffer per connection: NCCL_STEPS slots of one chunk (NCCL_P2P_NVL_CHUNKSIZE within a
// node, NCCL_P2P_NET_CHUNKSIZE between nodes, their defaults).
inline constexpr std::size_t kNcclSteps = 8;
inline constexpr std::size_t kChunkWithinNode = std::size_t(512) << 10;
inline constexpr std::size_t kChunkBetweenNodes = std::size_t(128) << 10;

struct NcclOrderSettings {
  bool on = false;
  // MOEBENCH_MPI_AS_NCCL_EAGER_BYTES: one buffer size for every connection (0: every send waits
  // for its receive); unset, NCCL's within and between nodes.
  std::optional<std::size_t> eager_bytes;
  // The bytes a connection buffers at its receiver.
  std::size_t connection_bytes(bool same_node) const {
    if (eager_bytes) return *eager_bytes;
    return kNcclSteps * (same_node ? kChunkWithinNode : kChunkBetweenNodes);
  }
};

// From MOEBENCH_MPI_AS_NCCL (0 or 1) and MOEBENCH_MPI_AS_NCCL_EAGER_BYTES, read once; throws
// Error naming the variable on any other value.
const NcclOrderSettings& nccl_order_settings();

// The issue order of one communicator.
class IssueOrder {
 public:
  // `label`: what the communicator is, for the stream record and the watchdog's message.
  explicit IssueOrder(std::string label);
  const std::string& label() const { return label_; }

  // On the issuing thread: the next ticket.
  std::uint64_t issue();
  // Blocks until every earlier ticket completed, under the watchdog (`operation` names the wait).
  void wait_turn(std::uint64_t ticket, const char* operation);
  // The operation holding `ticket` completed (or failed): the next may run.
  void done(std::uint64_t ticket);
  // The stream `stream_id` (named `stream`) issued an operation of this communicator.
  void note_stream(int stream_id, const std::string& stream);
  // The names of the streams that did.
  std::vector<std::string> streams() const;
  void forget_streams();
  // The name of the host's wait at a pair's first use (see connect in comm/comm_mpi.cpp): `to`,
  // the rank this one sends to first, `from`, the rank it receives from first (-1: none).
  const char* connect_wait_name(int to, int from) const;

 private:
  std::string label_;
  mutable std::mutex mutex_;
  std::condition_variable turn_;
  std::uint64_t issued_ = 0, completed_ = 0;
  std::vector<std::string> streams_;
};

// The tickets of one enqueued operation's issues that have not run yet (a graph replayed twice
// before its first replay ran issues it twice): taken at issue, given back in order when it runs.
class IssuedTickets {
 public:
  void push(std::uint64_t ticket);
  std::uint64_t pop();

 private:
  std::mutex mutex_;
  std::deque<std::uint64_t> tickets_;
};

// The communicators of the mode that were used from more than one stream since the last
// forget_communicator_streams() (which starts every record afresh), each as
// "<label>: <stream>, <stream>" with the streams' names in alphabetical order.
std::vector<std::string> communicators_on_several_streams();
// The streams that issued operations of more than one communicator since then, each as
// "<stream>: <label>; <label>" in the order of first use: where two communicators' operations
// queue behind each other on one stream, ranks that order them differently deadlock on NCCL.
std::vector<std::string> streams_with_several_communicators();
void forget_communicator_streams();
// Registers `order` in that record (kept while the communicator lives).
void register_issue_order(const std::shared_ptr<IssueOrder>& order);

}  // namespace moebench
