// What only the runtime knows about the moment an op runs, and the ops ask through Exec (kernels/
// exec.h never sees this state): whether this thread is capturing a graph (runtime/stream_graph.h),
// and whether the kernel log (runtime/kernel_log.h) is logging this process's ops.
#pragma once
#include <functional>

namespace moebench::op_hooks {

// A graph capture opens and closes on this thread.
void capture_opened();
void capture_closed();
bool capturing_on_this_thread();

// The kernel log logs the device's ops: an op then runs nothing beyond its own work.
void set_device_ops_logged(bool logged);

// Exec::trials_allowed: whether an op may run extra work now (timing a GEMM's algorithms). Not
// while this thread captures (the trials would be captured or break the capture), nor while the
// kernel log logs (they would be logged as the step's).
bool trials_allowed();

// While the kernel log logs the CPU's ops: what times and records an op the default stream runs at
// once (a created stream's worker records its own). nullptr: none.
using InlineOpLogger = void (*)(const char* name, const std::function<void()>& op);
void set_inline_op_logger(InlineOpLogger logger);
InlineOpLogger inline_op_logger();

}  // namespace moebench::op_hooks
