#include "runtime/op_hooks.h"
#include <atomic>

namespace moebench::op_hooks {

namespace {
thread_local int captures_on_this_thread = 0;
std::atomic<bool> device_ops_logged{false};
std::atomic<InlineOpLogger> inline_logger{nullptr};
}  // namespace

void capture_opened() { ++captures_on_this_thread; }
void capture_closed() { --captures_on_this_thread; }
bool capturing_on_this_thread() { return captures_on_this_thread > 0; }

void set_device_ops_logged(bool logged) { device_ops_logged.store(logged, std::memory_order_relaxed); }

bool trials_allowed() { return !capturing_on_this_thread() && !device_ops_logged.load(std::memory_order_relaxed); }

void set_inline_op_logger(InlineOpLogger logger) { inline_logger.store(logger, std::memory_order_release); }
InlineOpLogger inline_op_logger() { return inline_logger.load(std::memory_order_acquire); }

}  // namespace moebench::op_hooks
