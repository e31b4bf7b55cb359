// NCCL communicator for GPU buffers. The unique id travels over MPI_Bcast (or is local at a
// world of one). Every host call that can wait for a peer -- the bootstrap, the first use of a
// communicator (NCCL connects to the peers then, on the host), a barrier, wait() -- runs under
// the watchdog (--comm-timeout), and the communicator is registered for runtime/peer_wait.h:
// every host wait polls its asynchronous error, and the watchdog aborts it before it ends the
// process, so a stopped peer ends the whole job instead of leaving ranks hanging in a collective.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cuda_runtime.h>
#include <nccl.h>
#include <thread>
#include "comm/comm.h"
#include "runtime/peer_wait.h"
#include "runtime/runtime.h"
#include "kernels/cuda_check.cuh"
#include "runtime/cuda_stream.h"
#if MOEBENCH_WITH_MPI
#include <mpi.h>
#endif

namespace moebench {
namespace {

[[noreturn]] void nccl_fail(ncclResult_t r, const char* call, ncclComm_t comm) {
  std::string msg = std::string(call) + " failed: " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last && *last) msg += std::string(" (") + last + ")";
  throw Error(msg);
}

#define NCCL_CHECK(call, comm)                          \
  do {                                                  \
    ncclResult_t r_ = (call);                           \
    if (r_ != ncclSuccess) nccl_fail(r_, #call, comm);  \
  } while (0)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
  }
  throw Error("unknown dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::sum ? ncclSum : ncclMax; }

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(ncclComm_t comm) : comm_(comm) {
    NCCL_CHECK(ncclCommUserRank(comm_, &rank_), comm_);
    NCCL_CHECK(ncclCommCount(comm_, &size_), comm_);
    MOEBENCH_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(int)));
    register_comm_health(this, CommHealth{[this] { return async_error(); }, [this] { abort(); },
                                          [] { ncclGroupStart(); }, [] { ncclGroupEnd(); }});
  }
  ~NcclCommunicator() override {
    unregister_comm_health(this);
    cudaFree(barrier_word_);
    if (!aborted_) ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "nccl"; }
  std::string link() const override { return "measured: NCCL"; }

  void all_to_all(const void* send, void* recv, std::size_t count, DType t, const Stream& s) override {
    Watchdog::Scope watch("all_to_all (nccl)");  // a first use connects to the peers on the host
    const std::size_t block = bytes_of(count, t);
    NCCL_CHECK(ncclGroupStart(), comm_);
    for (int p = 0; p < size_; ++p) {
      NCCL_CHECK(ncclSend(static_cast<const char*>(send) + p * block, count, nccl_type(t), p, comm_, cuda_stream(s)), comm_);
      NCCL_CHECK(ncclRecv(static_cast<char*>(recv) + p * block, count, nccl_type(t), p, comm_, cuda_stream(s)), comm_);
    }
    NCCL_CHECK(ncclGroupEnd(), comm_);
  }

  void all_to_all_v(const void* send, const std::vector<std::size_t>& sc, const std::vector<std::size_t>& sd,
                    void* recv, const std::vector<std::size_t>& rc, const std::vector<std::size_t>& rd, DType t,
                    const Stream& s) override {
    Watchdog::Scope watch("all_to_all_v (nccl)");  // a first use connects to the peers on the host
    check_all_to_all_v(size_, sc, sd, rc, rd);
    NCCL_CHECK(ncclGroupStart(), comm_);
    for (int p = 0; p < size_; ++p) {
      if (sc[p]) NCCL_CHECK(ncclSend(static_cast<const char*>(send) + bytes_of(sd[p], t), sc[p], nccl_type(t), p, comm_, cuda_stream(s)), comm_);
      if (rc[p]) NCCL_CHECK(ncclRecv(static_cast<char*>(recv) + bytes_of(rd[p], t), rc[p], nccl_type(t), p, comm_, cuda_stream(s)), comm_);
    }
    NCCL_CHECK(ncclGroupEnd(), comm_);
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op, const Stream& s) override {
    Watchdog::Scope watch("all_reduce (nccl)");  // a first use connects to the peers on the host
    NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(t), nccl_op(op), comm_, cuda_stream(s)), comm_);
  }
  void all_gather(const void* send, void* recv, std::size_t count, DType t, const Stream& s) override {
    Watchdog::Scope watch("all_gather (nccl)");  // a first use connects to the peers on the host
    NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(t), comm_, cuda_stream(s)), comm_);
  }
  void reduce_scatter(const void* send, void* recv, std::size_t n, DType t, ReduceOp op, const Stream& s) override {
    Watchdog::Scope watch("reduce_scatter (nccl)");  // a first use connects to the peers on the host
    NCCL_CHECK(ncclReduceScatter(send, recv, n, nccl_type(t), nccl_op(op), comm_, cuda_stream(s)), comm_);
  }
  void send(const void* buf, std::size_t count, DType t, int peer, const Stream& s) override {
    Watchdog::Scope watch("send (nccl)");  // a first use connects to the peers on the host
    NCCL_CHECK(ncclSend(buf, count, nccl_type(t), peer, comm_, cuda_stream(s)), comm_);
  }
  void recv(void* buf, std::size_t count, DType t, int peer, const Stream& s) override {
    Watchdog::Scope watch("recv (nccl)");  // a first use connects to the peers on the host
    NCCL_CHECK(ncclRecv(buf, count, nccl_type(t), peer, comm_, cuda_stream(s)), comm_);
  }
  void send_recv(const void* send, int dst, void* recv, int src, std::size_t count, DType t, const Stream& s) override {
    Watchdog::Scope watch("send_recv (nccl)");  // a first use connects to the peers on the host
    NCCL_CHECK(ncclGroupStart(), comm_);
    NCCL_CHECK(ncclSend(send, count, nccl_type(t), dst, comm_, cuda_stream(s)), comm_);
    NCCL_CHECK(ncclRecv(recv, count, nccl_type(t), src, comm_, cuda_stream(s)), comm_);
    NCCL_CHECK(ncclGroupEnd(), comm_);
  }
  void barrier(const Stream& s) override {
    {
      Watchdog::Scope watch("barrier (nccl)");
      NCCL_CHECK(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, cuda_stream(s)), comm_);
    }
    wait_on("barrier (nccl)", s);
  }

  void wait(const Stream& s) override { wait_on("wait for a communicator's operations (nccl)", s); }

  // A communicator of the same ranks for collectives in flight beside this one's.
  std::unique_ptr<Communicator> dup() override { return split(0, rank_); }

  std::unique_ptr<Communicator> split(int color, int key) override {
    ncclComm_t sub = nullptr;
    {
      Watchdog::Scope watch("communicator split (nccl)");
      NCCL_CHECK(ncclCommSplit(comm_, color, key, &sub, nullptr), comm_);
    }
    if (!sub) throw Error("ncclCommSplit returned no communicator for colour " + std::to_string(color));
    return std::make_unique<NcclCommunicator>(sub);
  }

 private:
  // The stream's work done, polling the communicators' errors, under the watchdog.
  void wait_on(const char* operation, const Stream& s) {
    wait_for_peers(operation, [&] {
      const cudaError_t q = cudaStreamQuery(cuda_stream(s));
      if (q == cudaErrorNotReady) return false;
      MOEBENCH_CUDA_CHECK(q);
      return true;
    });
  }
  std::string async_error() {
    if (aborted_) return {};
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async == ncclSuccess || async == ncclInProgress) return {};
    return "rank " + std::to_string(rank_) + " of an NCCL communicator of " + std::to_string(size_) + ": " +
           ncclGetErrorString(async);
  }
  void abort() {
    if (!aborted_.exchange(true)) ncclCommAbort(comm_);
  }

  ncclComm_t comm_;
  std::atomic<bool> aborted_{false};
  int rank_ = 0, size_ = 1;
  void* barrier_word_ = nullptr;
};

}  // namespace

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL_VERSION_CODE = major*10000 + minor*100 + patch (since 2.9)
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

// Every wait has the watchdog's timeout, --comm-timeout (runtime/peer_wait.h).
std::unique_ptr<Communicator> make_nccl_communicator(const Runtime& rt) {
  // Several ranks sharing one GPU for a test of the multi-rank logic: NCCL refuses two ranks of
  // one host on one device, so each rank is made a host of its own (its socket transport joins them).
  if (const char* own = std::getenv("MOEBENCH_NCCL_HOSTID_PER_RANK"); own && std::string(own) == "1")
    setenv("NCCL_HOSTID", ("moebench-rank-" + std::to_string(rt.rank())).c_str(), 1);
  ncclUniqueId id;
  if (rt.rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
#if MOEBENCH_WITH_MPI
  if (rt.world() > 1) {
    Watchdog::Scope watch("NCCL bootstrap (MPI_Bcast of the unique id)");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  }
#else
  if (rt.world() > 1) throw Error("NCCL bootstrap needs MPI for more than one rank; this build has none");
#endif
  ncclComm_t comm = nullptr;
  {
    Watchdog::Scope watch("ncclCommInitRank (every rank joins)");
    NCCL_CHECK(ncclCommInitRank(&comm, rt.world(), id, rt.rank()), nullptr);
  }
  return std::make_unique<NcclCommunicator>(comm);
}

}  // namespace moebench
