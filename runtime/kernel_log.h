// Every op a device runs while the log is on, each with the breakdown range it was enqueued
// under (current_range_path(), runtime/range.h), so that a range's time reads kernel by kernel:
// on the CPU backend each stream op, queued or run at once on the default stream (its kernel's
// name; stream events and waits are not ops of the computation and are left out), on CUDA each kernel, copy and memset as CUPTI records them.
// On CUDA the log also sums the host's runtime and driver API calls (HostCallRecord), so that
// where the device sat idle between launches the host's side of the gap reads call by call.
// libcupti is loaded when the log starts, not linked: a machine without it runs everything else
// and start() says why there is no log. One log per process, started and stopped by one thread.
#pragma once
#include <string>
#include <vector>
#include "kernels/exec.h"

namespace moebench {

struct KernelRecord {
  std::string name;  // the kernel's (demangled, without its parameters), or "memcpy DtoD", "memset"
  std::string path;  // the innermost timed range open where it was enqueued; "" outside ranges
  double ms = 0;     // on the device
  double start_ms = 0;  // when it began, on one clock for the whole log (CUPTI's, or the host's); < 0: untold
  int run = 0;          // the run it was enqueued in (KernelLog::set_run)
};

// The host's runtime and driver API calls of one run under one range path and function, on CUDA:
// the outermost calls only (the driver calls a runtime call makes are inside its time), timed on
// the host from entry to return -- a synchronisation's wait for the device included.
struct HostCallRecord {
  std::string function;  // "cudaLaunchKernel", "cuLaunchKernelEx", "cudaEventSynchronize", ...
  std::string path;      // the innermost timed range open where it was called; "" outside ranges
  int run = 0;
  int calls = 0;
  double ms = 0;  // summed over the calls
};

class KernelLog {
 public:
  static constexpr int kNoRun = -1;
  // Starts logging `backend`'s ops: "" when it runs, else why it cannot (nothing is logged).
  // What is enqueued belongs to run 0 until set_run().
  static std::string start(Backend backend);
  // What is enqueued from now on belongs to run `run`; under kNoRun to none, and the log leaves it
  // out while staying on: a run whose records no one reads takes what starting the log costs the
  // host (CUPTI's first records), and the work between runs is not in any.
  static void set_run(int run);
  static int current_run();
  // Ends the log and returns what ran since start(). The device's work must have completed.
  static std::vector<KernelRecord> stop();
  // The host's API calls in the runs of the last stop()'s log (CUDA; none on the CPU backend).
  static std::vector<HostCallRecord> host_calls();
  static bool on();
  // A CPU stream op that ran (runtime/cpu_queue.cpp), the path and run it was enqueued under.
  static void record_cpu(const char* name, std::string path, int run, double start_us, double end_us);
};

// While one lives on a thread, what the thread enqueues is the pool marking freed blocks
// (MOEBENCH_POOL_POISON, a test mode), no op of the computation: the log leaves it out, on the CPU
// and on CUDA alike.
class PoolPoisoning {
 public:
  PoolPoisoning();
  ~PoolPoisoning();
  PoolPoisoning(const PoolPoisoning&) = delete;
  PoolPoisoning& operator=(const PoolPoisoning&) = delete;
  static bool on_this_thread();
};

// The CUDA half (runtime/kernel_log_cupti.cpp): "" once CUPTI records, else why not; then the
// records, each kernel with the path of the API call that launched it, and the host's API calls.
std::string cupti_log_start();
std::vector<KernelRecord> cupti_log_stop(std::vector<HostCallRecord>* host_calls);
// "cudaLaunchKernel" for CUPTI's "cudaLaunchKernel_v7000": the name without its version suffix.
std::string api_function_name(const char* name);
// A kernel's name as a reader wants it: demangled, its return type, parameters and anonymous
// namespaces left out ("moebench::layernorm_forward_kernel<__nv_bfloat16>").
std::string readable_kernel_name(const char* mangled);

}  // namespace moebench
