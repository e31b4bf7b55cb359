// NCCL communicator for GPU buffers. The unique id travels over MPI_Bcast (or is local at a
// world of one). wait() polls the stream and ncclCommGetAsyncError: an asynchronous error
// or an operation running past the timeout aborts the communicator and raises Error, which
// ends the whole job instead of leaving ranks hanging in a collective.
#include <chrono>
#include <cuda_runtime.h>
#include <nccl.h>
#include <thread>
#include "runtime/comm.h"
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
  NcclCommunicator(ncclComm_t comm, double timeout_s) : comm_(comm), timeout_s_(timeout_s) {
    NCCL_CHECK(ncclCommUserRank(comm_, &rank_), comm_);
    NCCL_CHECK(ncclCommCount(comm_, &size_), comm_);
    MOEBENCH_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(int)));
  }
  ~NcclCommunicator() override {
    cudaFree(barrier_word_);
    if (comm_) ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "nccl"; }
  std::string link() const override { return "measured: NCCL"; }

  void all_to_all(const void* send, void* recv, std::size_t count, DType t, const Stream& s) override {
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
    check_all_to_all_v(size_, sc, sd, rc, rd);
    NCCL_CHECK(ncclGroupStart(), comm_);
    for (int p = 0; p < size_; ++p) {
      if (sc[p]) NCCL_CHECK(ncclSend(static_cast<const char*>(send) + bytes_of(sd[p], t), sc[p], nccl_type(t), p, comm_, cuda_stream(s)), comm_);
      if (rc[p]) NCCL_CHECK(ncclRecv(static_cast<char*>(recv) + bytes_of(rd[p], t), rc[p], nccl_type(t), p, comm_, cuda_stream(s)), comm_);
    }
    NCCL_CHECK(ncclGroupEnd(), comm_);
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op, const Stream& s) override {
    NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(t), nccl_op(op), comm_, cuda_stream(s)), comm_);
  }
  void all_gather(const void* send, void* recv, std::size_t count, DType t, const Stream& s) override {
    NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(t), comm_, cuda_stream(s)), comm_);
  }
  void reduce_scatter(const void* send, void* recv, std::size_t n, DType t, ReduceOp op, const Stream& s) override {
    NCCL_CHECK(ncclReduceScatter(send, recv, n, nccl_type(t), nccl_op(op), comm_, cuda_stream(s)), comm_);
  }
  void send(const void* buf, std::size_t count, DType t, int peer, const Stream& s) override {
    NCCL_CHECK(ncclSend(buf, count, nccl_type(t), peer, comm_, cuda_stream(s)), comm_);
  }
  void recv(void* buf, std::size_t count, DType t, int peer, const Stream& s) override {
    NCCL_CHECK(ncclRecv(buf, count, nccl_type(t), peer, comm_, cuda_stream(s)), comm_);
  }
  void send_recv(const void* send, int dst, void* recv, int src, std::size_t count, DType t, const Stream& s) override {
    NCCL_CHECK(ncclGroupStart(), comm_);
    NCCL_CHECK(ncclSend(send, count, nccl_type(t), dst, comm_, cuda_stream(s)), comm_);
    NCCL_CHECK(ncclRecv(recv, count, nccl_type(t), src, comm_, cuda_stream(s)), comm_);
    NCCL_CHECK(ncclGroupEnd(), comm_);
  }
  void barrier(const Stream& s) override {
    NCCL_CHECK(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, cuda_stream(s)), comm_);
    wait(s);
  }

  void wait(const Stream& s) override {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t q = cudaStreamQuery(cuda_stream(s));
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) MOEBENCH_CUDA_CHECK(q);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw Error(std::string("NCCL asynchronous error: ") + ncclGetErrorString(async));
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_s_) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw Error("NCCL operation did not complete in " + std::to_string(int(timeout_s_)) +
                    " s (--comm-timeout); a peer rank may have failed");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // A communicator of the same ranks for collectives in flight beside this one's.
  std::unique_ptr<Communicator> dup() override { return split(0, rank_); }

  std::unique_ptr<Communicator> split(int color, int key) override {
    ncclComm_t sub = nullptr;
    NCCL_CHECK(ncclCommSplit(comm_, color, key, &sub, nullptr), comm_);
    if (!sub) throw Error("ncclCommSplit returned no communicator for colour " + std::to_string(color));
    return std::make_unique<NcclCommunicator>(sub, timeout_s_);
  }

 private:
  ncclComm_t comm_;
  double timeout_s_;
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

std::unique_ptr<Communicator> make_nccl_communicator(const Runtime& rt, double timeout_s) {
  ncclUniqueId id;
  if (rt.rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
#if MOEBENCH_WITH_MPI
  if (rt.world() > 1) MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
#else
  if (rt.world() > 1) throw Error("NCCL bootstrap needs MPI for more than one rank; this build has none");
#endif
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, rt.world(), id, rt.rank()), nullptr);
  return std::make_unique<NcclCommunicator>(comm, timeout_s);
}

}  // namespace moebench
