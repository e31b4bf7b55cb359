// MPI communicator for CPU buffers. Calls are blocking, so the stream argument only orders
// nothing further (CPU streams run in call order) and wait() has nothing to complete. Every
// call runs under the watchdog: a peer that never arrives ends the job after --comm-timeout.
#include <climits>
#include <mpi.h>
#include "harness/comm.h"
#include "harness/watchdog.h"

namespace moebench {
namespace {

int to_int(std::size_t v, const char* what) {
  if (v > static_cast<std::size_t>(INT_MAX))
    throw Error(std::string(what) + " of " + std::to_string(v) + " elements exceeds MPI's int count limit");
  return static_cast<int>(v);
}

MPI_Datatype mpi_type(DType t, bool reducing) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::f16:
    case DType::bf16:
      if (reducing) throw Error(std::string("the MPI communicator reduces fp32, int32 and int64 only, not ") + std::string(dtype_name(t)));
      return MPI_UINT16_T;  // moved as raw 16-bit words
  }
  throw Error("unknown dtype");
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::sum ? MPI_SUM : MPI_MAX; }

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "mpi"; }

  void all_to_all(const void* send, void* recv, std::size_t count, DType t, const Stream&) override {
    const int c = to_int(count, "all_to_all");
    Watchdog::Scope watch("all_to_all (mpi)");
    MPI_Alltoall(send, c, mpi_type(t, false), recv, c, mpi_type(t, false), comm_);
  }

  void all_to_all_v(const void* send, const std::vector<std::size_t>& sc, const std::vector<std::size_t>& sd,
                    void* recv, const std::vector<std::size_t>& rc, const std::vector<std::size_t>& rd, DType t,
                    const Stream&) override {
    const std::size_t n = static_cast<std::size_t>(size_);
    if (sc.size() != n || sd.size() != n || rc.size() != n || rd.size() != n)
      throw Error("all_to_all_v: counts and displacements need one entry per rank (" + std::to_string(n) + ")");
    std::vector<int> isc(n), isd(n), irc(n), ird(n);
    for (std::size_t i = 0; i < n; ++i) {
      isc[i] = to_int(sc[i], "all_to_all_v count");
      isd[i] = to_int(sd[i], "all_to_all_v displacement");
      irc[i] = to_int(rc[i], "all_to_all_v count");
      ird[i] = to_int(rd[i], "all_to_all_v displacement");
    }
    Watchdog::Scope watch("all_to_all_v (mpi)");
    MPI_Alltoallv(send, isc.data(), isd.data(), mpi_type(t, false), recv, irc.data(), ird.data(), mpi_type(t, false),
                  comm_);
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op, const Stream&) override {
    Watchdog::Scope watch("all_reduce (mpi)");
    MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, to_int(count, "all_reduce"), mpi_type(t, true), mpi_op(op),
                  comm_);
  }

  void all_gather(const void* send, void* recv, std::size_t count, DType t, const Stream&) override {
    const int c = to_int(count, "all_gather");
    Watchdog::Scope watch("all_gather (mpi)");
    MPI_Allgather(send, c, mpi_type(t, false), recv, c, mpi_type(t, false), comm_);
  }

  void reduce_scatter(const void* send, void* recv, std::size_t n, DType t, ReduceOp op, const Stream&) override {
    Watchdog::Scope watch("reduce_scatter (mpi)");
    MPI_Reduce_scatter_block(send, recv, to_int(n, "reduce_scatter"), mpi_type(t, true), mpi_op(op), comm_);
  }

  void send(const void* buf, std::size_t count, DType t, int peer, const Stream&) override {
    check_peer(peer);
    Watchdog::Scope watch("send (mpi)");
    MPI_Send(buf, to_int(count, "send"), mpi_type(t, false), peer, kTag, comm_);
  }

  void recv(void* buf, std::size_t count, DType t, int peer, const Stream&) override {
    check_peer(peer);
    Watchdog::Scope watch("recv (mpi)");
    MPI_Recv(buf, to_int(count, "recv"), mpi_type(t, false), peer, kTag, comm_, MPI_STATUS_IGNORE);
  }

  void send_recv(const void* send, int dst, void* recv, int src, std::size_t count, DType t, const Stream&) override {
    check_peer(dst);
    check_peer(src);
    const int c = to_int(count, "send_recv");
    Watchdog::Scope watch("send_recv (mpi)");
    MPI_Sendrecv(send, c, mpi_type(t, false), dst, kTag, recv, c, mpi_type(t, false), src, kTag, comm_,
                 MPI_STATUS_IGNORE);
  }

  void barrier(const Stream&) override {
    Watchdog::Scope watch("barrier (mpi)");
    MPI_Barrier(comm_);
  }
  void wait(const Stream&) override {}

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub;
    Watchdog::Scope watch("communicator split (mpi)");
    MPI_Comm_split(comm_, color, key, &sub);
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_ARE_FATAL);
    return std::make_unique<MpiCommunicator>(sub, true);
  }

 private:
  static constexpr int kTag = 7;
  void check_peer(int peer) const {
    if (peer < 0 || peer >= size_)
      throw Error("peer " + std::to_string(peer) + " out of range for a communicator of " + std::to_string(size_));
  }
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);  // our own context: no tag clash with other MPI users
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_ARE_FATAL);
  return std::make_unique<MpiCommunicator>(dup, true);
}

}  // namespace moebench
