// Every op a device runs while the log is on, each with the breakdown range it was enqueued
// under (current_range_path(), runtime/range.h), so that a range's time reads kernel by kernel:
// on the CPU backend each stream op, queued or run at once on the default stream (its kernel's
// name; stream events and waits are not ops of the computation and are left out), on CUDA each kernel, copy and memset as CUPTI records them.
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
// records, each kernel with the path of the API call that launched it.
std::string cupti_log_start();
std::vector<KernelRecord> cupti_log_stop();
// A kernel's name as a reader wants it: demangled, its return type, parameters and anonymous
// namespaces left out ("moebench::layernorm_forward_kernel<__nv_bfloat16>").
std::string readable_kernel_name(const char* mangled);

}  // namespace moebench
