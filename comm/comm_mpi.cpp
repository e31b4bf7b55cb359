// MPI communicator for CPU buffers. Each call runs in the order of its stream: inline on the
// default stream, on the worker thread of a created one (MPI_THREAD_MULTIPLE), so a collective
// on one stream overlaps computation on another. Every call runs under the watchdog (a peer
// that never arrives ends the job after --comm-timeout) and, on an emulated link, completes no
// earlier than the link allows. In NCCL's order (comm/nccl_order.h) the operations of one
// communicator run one at a time in the order the host issued them, a pair of ranks connects at
// its first use, and a send that does not fit its connection's buffer waits for its receive.
#include <algorithm>
#include <atomic>
#include <array>
#include <chrono>
#include <climits>
#include <mutex>
#include <mpi.h>
#include <thread>
#include <vector>
#include "kernels/convert.h"
#include "comm/comm.h"
#include "comm/eager_sends.h"
#include "comm/nccl_order.h"
#include "comm/precise_sleep.h"
#include "comm/ring_reduce_scatter.h"
#include "runtime/timeline.h"
#include "runtime/watchdog.h"

namespace moebench {
namespace {

int to_int(std::size_t v, const char* what) {
  if (v > static_cast<std::size_t>(INT_MAX))
    throw Error(std::string(what) + " of " + std::to_string(v) + " elements exceeds MPI's int count limit");
  return static_cast<int>(v);
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::f16:
    case DType::bf16: return MPI_UINT16_T;  // moved as raw 16-bit words, reduced by the ops below
  }
  throw Error("unknown dtype");
}

// MPI has no 16-bit float types: fp16 and bf16 words are reduced by user operations that
// widen each pair to fp32, combine and round back (as NCCL's half and bfloat16 sums do).
template <DType T, bool Sum>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = from_bits16(T, a[i]), y = from_bits16(T, b[i]);
    b[i] = to_bits16(T, Sum ? x + y : std::max(x, y));
  }
}

MPI_Op mpi_op(ReduceOp op, DType t) {
  if (t != DType::f16 && t != DType::bf16) return op == ReduceOp::sum ? MPI_SUM : MPI_MAX;
  // Created once, on first use (after MPI_Init), and kept for the process.
  static const std::array<MPI_Op, 4> ops = [] {
    std::array<MPI_Op, 4> o{};
    MPI_Op_create(&reduce_16bit<DType::f16, true>, 1, &o[0]);
    MPI_Op_create(&reduce_16bit<DType::f16, false>, 1, &o[1]);
    MPI_Op_create(&reduce_16bit<DType::bf16, true>, 1, &o[2]);
    MPI_Op_create(&reduce_16bit<DType::bf16, false>, 1, &o[3]);
    return o;
  }();
  return ops[(t == DType::bf16 ? 2 : 0) + (op == ReduceOp::sum ? 0 : 1)];
}

class MpiCommunicator final : public Communicator {
 public:
  // `origin`: how it was made ("world", "dup of #3", ...), in NCCL order's label.
  MpiCommunicator(MPI_Comm comm, std::optional<EmulatedLink> link, const std::string& origin)
      : comm_(comm), link_(std::move(link)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    static std::atomic<int> made{0};
    serial_ = made++;
    if (nccl_order_settings().on) {
      order_ = std::make_shared<IssueOrder>("communicator #" + std::to_string(serial_) + " (" + std::to_string(size_) +
                                            " ranks, " + origin + ")");
      register_issue_order(order_);
      capacity_ = connection_bytes(comm_);
      sends_connected_.assign(std::size_t(size_), 0);
      receives_connected_.assign(std::size_t(size_), 0);
    }
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (order_) drain_eager_sends(comm_);
    MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "mpi"; }
  std::string link() const override { return link_ ? link_->describe() : "measured: MPI between the ranks' hosts"; }

  void all_to_all(const void* send, void* recv, std::size_t count, DType t, const Stream& s) override {
    const int c = to_int(count, "all_to_all");
    const double bus = double(bytes_of(count, t)) * (size_ - 1);
    run(s, "all_to_all (mpi)", bus, [=, this] { MPI_Alltoall(send, c, mpi_type(t), recv, c, mpi_type(t), comm_); });
  }

  void all_to_all_v(const void* send, const std::vector<std::size_t>& sc, const std::vector<std::size_t>& sd,
                    void* recv, const std::vector<std::size_t>& rc, const std::vector<std::size_t>& rd, DType t,
                    const Stream& s) override {
    check_all_to_all_v(size_, sc, sd, rc, rd);
    const std::size_t n = static_cast<std::size_t>(size_);
    std::vector<int> isc(n), isd(n), irc(n), ird(n);
    double sent = 0, received = 0;  // to and from the other ranks
    for (std::size_t i = 0; i < n; ++i) {
      isc[i] = to_int(sc[i], "all_to_all_v count");
      isd[i] = to_int(sd[i], "all_to_all_v displacement");
      irc[i] = to_int(rc[i], "all_to_all_v count");
      ird[i] = to_int(rd[i], "all_to_all_v displacement");
      if (int(i) != rank_) {
        sent += double(bytes_of(sc[i], t));
        received += double(bytes_of(rc[i], t));
      }
    }
    std::string peers;  // which rank got and gave how much (the FasterMoE-style order is read off it)
    if (Timeline::enabled()) {
      auto list = [&](const std::vector<std::size_t>& counts) {
        std::string out = "[";
        for (std::size_t i = 0; i < n; ++i) out += (i ? ", " : "") + std::to_string(bytes_of(counts[i], t));
        return out + "]";
      };
      peers = "\"send_bytes\": " + list(sc) + ", \"recv_bytes\": " + list(rc);
    }
    run(s, "all_to_all_v (mpi)", std::max(sent, received), [=, this] {
      MPI_Alltoallv(send, isc.data(), isd.data(), mpi_type(t), recv, irc.data(), ird.data(), mpi_type(t),
                    comm_);
    }, std::move(peers));
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op, const Stream& s) override {
    const int c = to_int(count, "all_reduce");
    const MPI_Datatype type = mpi_type(t);
    const double bus = 2.0 * double(bytes_of(count, t)) * (size_ - 1) / size_;
    run(s, "all_reduce (mpi)", bus,
        [=, this] { MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, c, type, mpi_op(op, t), comm_); });
  }

  void all_gather(const void* send, void* recv, std::size_t count, DType t, const Stream& s) override {
    const int c = to_int(count, "all_gather");
    const double bus = double(bytes_of(count, t)) * (size_ - 1);
    run(s, "all_gather (mpi)", bus, [=, this] { MPI_Allgather(send, c, mpi_type(t), recv, c, mpi_type(t), comm_); });
  }

  // MPI's own algorithm for a small buffer, where latency decides; from kRingFromBytes the ring
  // (comm/ring_reduce_scatter.h). Open MPI 4.1's MPI_Reduce_scatter_block switches there to an
  // algorithm that took several times an all-reduce of the same buffer on CPU ranks, where a
  // reduce-scatter should take about half: ZeRO-1's gradient step measured the library's choice.
  static constexpr std::size_t kRingFromBytes = std::size_t(256) << 10;  // the whole send buffer

  void reduce_scatter(const void* send, void* recv, std::size_t n, DType t, ReduceOp op, const Stream& s) override {
    const int c = to_int(n, "reduce_scatter");
    const MPI_Datatype type = mpi_type(t);
    const double bus = double(bytes_of(n, t)) * (size_ - 1);
    const bool ring = bytes_of(n, t) * std::size_t(size_) >= kRingFromBytes;
    run(s, "reduce_scatter (mpi)", bus, [=, this] {
      if (ring)
        ring_reduce_scatter(send, recv, c, type, mpi_op(op, t), comm_);
      else
        MPI_Reduce_scatter_block(send, recv, c, type, mpi_op(op, t), comm_);
    }, ring ? "\"algorithm\": \"ring\"" : "\"algorithm\": \"mpi\"");
  }

  // Point-to-point waits poll and sleep instead of spinning: a pipeline stage's send waits on
  // its own stream for a receiver still computing (a rendezvous above the eager size), and a
  // spinning wait there takes the core a stage computes on (seen: 1F1B's step 40% over its
  // simulated time on 2 ranks of a 2-core machine, 6% with waits that sleep).
  // In NCCL's order a send that does not fit its connection's buffer is synchronous (MPI_Issend:
  // it completes once its receive has started) and a smaller one completes once copied and room
  // is left beside the sends still unreceived (comm/eager_sends.h).
  void send(const void* buf, std::size_t count, DType t, int peer, const Stream& s) override {
    check_peer(peer);
    const int c = to_int(count, "send");
    const std::size_t bytes = bytes_of(count, t);
    connect(peer, -1);
    const bool eager = order_ && bytes <= capacity_[std::size_t(peer)];
    run(s, "send (mpi)", double(bytes), [=, this] {
      if (eager) return eager_send(buf, c, mpi_type(t), bytes, capacity_[std::size_t(peer)], peer, kTag, comm_);
      MPI_Request r;
      if (order_)
        MPI_Issend(buf, c, mpi_type(t), peer, kTag, comm_, &r);
      else
        MPI_Isend(buf, c, mpi_type(t), peer, kTag, comm_, &r);
      wait_without_spinning(r);
    });
  }

  void recv(void* buf, std::size_t count, DType t, int peer, const Stream& s) override {
    check_peer(peer);
    const int c = to_int(count, "recv");
    connect(-1, peer);
    run(s, "recv (mpi)", double(bytes_of(count, t)), [=, this] {
      MPI_Request r;
      MPI_Irecv(buf, c, mpi_type(t), peer, kTag, comm_, &r);
      wait_without_spinning(r);
    });
  }

  static void wait_without_spinning(MPI_Request& r) {
    int done = 0;
    for (int i = 0; i < 100 && !done; ++i) MPI_Test(&r, &done, MPI_STATUS_IGNORE);  // what is there already
    auto pause = std::chrono::microseconds(10);
    while (!done) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(100));
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    }
  }

  void send_recv(const void* send, int dst, void* recv, int src, std::size_t count, DType t, const Stream& s) override {
    check_peer(dst);
    check_peer(src);
    const int c = to_int(count, "send_recv");
    connect(dst, src);  // both sides at once, as in one NCCL group
    run(s, "send_recv (mpi)", double(bytes_of(count, t)), [=, this] {
      MPI_Sendrecv(send, c, mpi_type(t), dst, kTag, recv, c, mpi_type(t), src, kTag, comm_,
                   MPI_STATUS_IGNORE);
    });
  }

  void barrier(const Stream& s) override {
    run(s, "barrier (mpi)", 0.0, [this] { MPI_Barrier(comm_); });
  }
  void wait(const Stream& s) override { s.synchronize(); }

  // Host calls, collective over the communicator: in NCCL's order they take their turn after the
  // operations issued before them.
  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub;
    on_host("communicator split (mpi)", [&] { MPI_Comm_split(comm_, color, key, &sub); });
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_ARE_FATAL);
    return std::make_unique<MpiCommunicator>(sub, link_,
                                             "split of #" + std::to_string(serial_) + ", colour " + std::to_string(color));
  }

  std::unique_ptr<Communicator> dup() override {
    MPI_Comm copy;
    on_host("communicator dup (mpi)", [&] { MPI_Comm_dup(comm_, &copy); });
    MPI_Comm_set_errhandler(copy, MPI_ERRORS_ARE_FATAL);
    return std::make_unique<MpiCommunicator>(copy, link_, "dup of #" + std::to_string(serial_));
  }

 private:
  static constexpr int kTag = 7;
  static constexpr int kConnectTag = 8;

  // NCCL's runtime connect, in its order: the first send to `to` and the first receive from
  // `from` (-1: none) block the issuing host until the peer has issued its side of that
  // connection, each side a one-byte synchronous message on a tag of its own.
  void connect(int to, int from) {
    if (!order_) return;
    if (to == rank_) to = -1;  // a rank's own copy needs no connection
    if (from == rank_) from = -1;
    std::lock_guard<std::mutex> lock(connect_mutex_);
    if (to >= 0 && sends_connected_[std::size_t(to)]) to = -1;
    if (from >= 0 && receives_connected_[std::size_t(from)]) from = -1;
    if (to < 0 && from < 0) return;
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    char out = 0, in = 0;
    if (to >= 0) MPI_Issend(&out, 1, MPI_CHAR, to, kConnectTag, comm_, &r[0]);
    if (from >= 0) MPI_Irecv(&in, 1, MPI_CHAR, from, kConnectTag, comm_, &r[1]);
    {
      Watchdog::Scope watch(order_->connect_wait_name(to, from));
      wait_without_spinning(r[0]);
      wait_without_spinning(r[1]);
    }
    if (to >= 0) sends_connected_[std::size_t(to)] = 1;
    if (from >= 0) receives_connected_[std::size_t(from)] = 1;
  }
  void check_peer(int peer) const {
    if (peer < 0 || peer >= size_)
      throw Error("peer " + std::to_string(peer) + " out of range for a communicator of " + std::to_string(size_));
  }

  template <class F>
  void on_host(const char* name, F call) {
    const std::uint64_t ticket = order_ ? order_->issue() : 0;
    if (order_) order_->wait_turn(ticket, name);
    {
      Watchdog::Scope watch(name);
      call();
    }
    if (order_) order_->done(ticket);
  }

  // Runs `call` in stream order under the watchdog, and in NCCL's order after every operation
  // issued before it on this communicator; on an emulated link, sleeps until the link would have
  // carried `bus_bytes` after what it carries already. Records the operation in the timeline with
  // its bus bytes, the link's wait and `details`.
  template <class F>
  void run(const Stream& s, const char* name, double bus_bytes, F call, std::string details = {}) {
    std::shared_ptr<IssuedTickets> tickets;
    std::function<void()> on_issue;
    if (order_) {
      order_->note_stream(s.id, s.queue ? s.queue->name() : "default");
      tickets = std::make_shared<IssuedTickets>();
      on_issue = [order = order_, tickets] { tickets->push(order->issue()); };
    }
    run_on(s, name, [this, name, bus_bytes, call, details, tickets, track = s.id] {
      std::uint64_t ticket = 0;
      if (tickets) order_->wait_turn(ticket = tickets->pop(), name);
      struct Turn {  // the next operation's turn, also when this one fails
        IssueOrder* order;
        std::uint64_t ticket;
        ~Turn() { if (order) order->done(ticket); }
      } turn{tickets ? order_.get() : nullptr, ticket};
      const double start_us = Timeline::now_us();  // no later than `start`: the record holds the link's whole wait
      const auto start = std::chrono::steady_clock::now();
      const auto done = link_ ? link_->book(start, bus_bytes) : start;
      {
        Watchdog::Scope watch(name);
        call();
      }
      if (link_) sleep_until_precisely(done);
      if (Timeline::enabled()) {
        std::string args = "\"bus_bytes\": " + std::to_string(std::int64_t(bus_bytes));
        if (link_) args += ", \"link_us\": " + std::to_string(link_->seconds(bus_bytes) * 1e6);
        if (!details.empty()) args += ", " + details;
        if (track == 0)  // inline: no queue records it
          Timeline::record_op(track, name, start_us, Timeline::now_us(), args);
        else
          Timeline::set_op_args(std::move(args));
      }
    }, {}, std::move(on_issue));
  }

  MPI_Comm comm_;
  std::optional<EmulatedLink> link_;
  int rank_ = 0, size_ = 1, serial_ = 0;
  std::shared_ptr<IssueOrder> order_;  // NCCL's order, when on
  std::vector<std::size_t> capacity_;  // in NCCL's order: each peer's connection buffer
  std::mutex connect_mutex_;
  std::vector<char> sends_connected_, receives_connected_;  // by peer, in NCCL's order
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const std::optional<EmulatedLink>& link) {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);  // our own context: no tag clash with other MPI users
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_ARE_FATAL);
  return std::make_unique<MpiCommunicator>(dup, link, "world");
}

}  // namespace moebench
