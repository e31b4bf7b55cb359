// Where an op runs: the backend and, on CUDA, the stream and cuBLAS handle; on the CPU, the
// stream's queue. Handles are opaque pointers so that CPU-only code never includes CUDA headers.
// The runtime (a floor above) implements HostQueue and fills Exec; nothing here knows its types.
#pragma once
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

namespace moebench {

enum class Backend { cpu, cuda };

inline const char* backend_name(Backend b) { return b == Backend::cpu ? "cpu" : "cuda"; }

// The in-order queue of a CPU stream. `op` runs in the stream's order, later on a created
// stream's worker or at once on the default stream: it captures its arguments by value (pointers
// to device buffers, not to the caller's temporaries). `details` (a JSON object body, e.g.
// "\"bytes\": 64") goes with the op into the runtime's timeline; build it only where
// recording() says the queue keeps it. `on_issue`, when given, runs on the
// enqueuing thread each time the op is issued to run -- now, or at each replay of a graph that
// captured it -- before anything later is issued: a communicator takes its turn there.
class HostQueue {
 public:
  virtual ~HostQueue() = default;
  virtual void enqueue(const char* name, std::function<void()> op, std::string details = {},
                       std::function<void()> on_issue = {}) = 0;
  virtual bool recording() const = 0;
  // The stream's name (its timeline track and its errors say it).
  virtual const std::string& name() const = 0;
  // Waits until everything enqueued so far has run; throws Error if one of those ops failed.
  // Under the watchdog (runtime/watchdog.h), as CUDA's polled stream waits: past --comm-timeout
  // it ends the process.
  virtual void synchronize() = 0;
  // The same wait with no deadline of its own, as a CUDA copy into pageable host memory waits
  // for its stream (Device::copy_to_host drains the stream under the deadline first).
  virtual void synchronize_without_deadline() = 0;
};

struct Exec {
  Backend backend = Backend::cpu;
  void* stream = nullptr;     // cudaStream_t
  void* blas = nullptr;       // cublasHandle_t of this stream
  void* blas_lt = nullptr;    // cublasLtHandle_t of this stream
  void* workspace = nullptr;  // the stream's GEMM workspace (cuBLAS's, lent to cuBLASLt calls)
  std::size_t workspace_bytes = 0;
  bool tensor_cores = true;   // GEMMs may use tensor cores (TF32 for fp32 inputs)
  // cpu: the stream's queue (the default stream's runs each op at once, on the calling thread);
  // nullptr, in an Exec no device made: ops run at once, unobserved.
  HostQueue* queue = nullptr;
  // Whether an op may run work beyond its own now (timing a GEMM's algorithms); the runtime says
  // no while this thread captures a graph or the kernel log logs. nullptr: it may.
  bool (*trials_allowed)() = nullptr;
  // cuda: the host's wait for an event of this stream, polled under the runtime's deadline (work
  // before it may wait on a stopped peer). nullptr: cudaEventSynchronize.
  void (*wait_event)(void* event) = nullptr;
};

// Raised for invalid arguments and library failures inside one process; a bench's main
// turns it into an error line and ends the whole MPI job.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs a CPU op in stream order: on the queue of `ex`, or now when it has none.
template <class F>
void run_host(const Exec& ex, const char* name, F&& op, std::string details = {}) {
  if (ex.queue)
    ex.queue->enqueue(name, std::function<void()>(std::forward<F>(op)), std::move(details));
  else
    op();
}

// Whether an op enqueued on `ex` now is recorded with its details.
inline bool records_details(const Exec& ex) { return ex.queue && ex.queue->recording(); }

#if MOEBENCH_WITH_CUDA
inline constexpr bool kCudaBuilt = true;
#else
inline constexpr bool kCudaBuilt = false;
#endif

[[noreturn]] inline void cuda_not_built(const char* op) {
  throw Error(std::string(op) + ": this build has no CUDA backend (configure with the CUDA toolkit, MOEBENCH_CUDA=AUTO or ON)");
}

}  // namespace moebench
