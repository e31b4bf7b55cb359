// NCCL's ordering, imitated by the MPI communicator on the CPU ranks, so that what deadlocks on
// NCCL deadlocks here too (MOEBENCH_MPI_AS_NCCL=1; on in the test suites). NCCL runs the
// operations of one communicator one at a time, in the order the host issued them, whatever
// stream issued each; MPI on CPU threads lets operations on two streams pass each other. In the
// mode every operation of a communicator takes a ticket when the host issues it (or launches a
// graph that captured it) and runs once every earlier ticket of that communicator has
// completed; a point-to-point send above the eager size completes only once its receive has
// started, as NCCL's does beyond the buffer it holds at its peer, and a smaller one completes
// once copied (comm/eager_sends.h). The mode also records which streams issued each
// communicator's operations: a communicator used from several streams is where an order of
// issue can deadlock, and the tests list them.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace moebench {

struct NcclOrderSettings {
  bool on = false;
  // Sends of at most this many bytes complete without their receive (NCCL_BUFFSIZE's default).
  std::size_t eager_bytes = std::size_t(4) << 20;
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
  // The stream `stream` issued an operation of this communicator.
  void note_stream(const std::string& stream);
  std::vector<std::string> streams() const;
  void forget_streams();

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
void forget_communicator_streams();
// Registers `order` in that record (kept while the communicator lives).
void register_issue_order(const std::shared_ptr<IssueOrder>& order);

}  // namespace moebench
