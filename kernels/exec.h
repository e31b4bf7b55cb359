// Where an op runs: the backend and, on CUDA, the stream and cuBLAS handle; on the CPU, the
// stream's work queue (ops run in order on its worker thread) or none (they run inline on the
// calling thread). Handles are opaque pointers so that CPU-only code never includes CUDA headers.
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

namespace moebench {

struct CpuCapture;  // runtime/cpu_capture.h

enum class Backend { cpu, cuda };

inline const char* backend_name(Backend b) { return b == Backend::cpu ? "cpu" : "cuda"; }

// The in-order queue of a CPU stream. `op` runs later on the stream's worker: it captures its
// arguments by value (pointers to device buffers, not to the caller's temporaries). `details`
// (a JSON object body, e.g. "\"bytes\": 64") goes with the op into the runtime's timeline;
// build it only where recording() says the queue keeps it. `on_issue`, when given, runs on the
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
  virtual void synchronize() = 0;
  // The graph capture the ops now go into instead of running (runtime/cpu_capture.h), or nullptr.
  virtual CpuCapture* capture() const = 0;
  // From now on ops go into `into` (nullptr: they run again).
  virtual void set_capture(CpuCapture* into) = 0;
};

struct Exec {
  Backend backend = Backend::cpu;
  void* stream = nullptr;     // cudaStream_t
  void* blas = nullptr;       // cublasHandle_t of this stream
  void* blas_lt = nullptr;    // cublasLtHandle_t of this stream
  void* workspace = nullptr;  // the stream's GEMM workspace (cuBLAS's, lent to cuBLASLt calls)
  std::size_t workspace_bytes = 0;
  bool tensor_cores = true;   // GEMMs may use tensor cores (TF32 for fp32 inputs)
  HostQueue* queue = nullptr; // cpu: the stream's queue; nullptr runs ops inline
};

// Raised for invalid arguments and library failures inside one process; a bench's main
// turns it into an error line and ends the whole MPI job.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
// Graph captures this thread has open (runtime/stream_graph.h). While one is, an op on a stream
// without a queue -- the CPU's default stream, which runs it at once -- is an error: it would run
// now and never in a replay, as CUDA refuses legacy-stream work while this thread captures.
inline thread_local int graph_captures_on_this_thread = 0;
[[noreturn]] inline void inline_op_while_capturing(const char* name) {
  throw Error(std::string(name) + ": enqueued on the default stream while this thread captures a graph (it would run "
              "now, not in the graph's replays); give it one of the captured streams");
}

// While the kernel log (runtime/kernel_log.h) logs this process's CUDA ops: an op then runs
// nothing beyond its own work (no trial runs of a GEMM's algorithms), which would be logged as the step's.
inline std::atomic<bool> device_ops_logged{false};

// While the kernel log (runtime/kernel_log.h) logs the CPU's ops: what times and records an op
// run at once on a stream without a queue (a queued op is recorded by its queue's worker).
using InlineOpLogger = void (*)(const char* name, const std::function<void()>& op);
inline std::atomic<InlineOpLogger> inline_op_logger{nullptr};

// An op on a stream without a queue: now, on the calling thread.
template <class F>
void run_inline(const char* name, F& op) {
  if (graph_captures_on_this_thread) inline_op_while_capturing(name);
  if (const InlineOpLogger log = inline_op_logger.load(std::memory_order_acquire)) {
    log(name, [&op] { op(); });
    return;
  }
  op();
}
}  // namespace detail

// Runs a CPU op in stream order: on the queue of `ex`, or now when it has none.
template <class F>
void run_host(const Exec& ex, const char* name, F&& op, std::string details = {}) {
  if (ex.queue) {
    ex.queue->enqueue(name, std::function<void()>(std::forward<F>(op)), std::move(details));
  } else {
    detail::run_inline(name, op);
  }
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
