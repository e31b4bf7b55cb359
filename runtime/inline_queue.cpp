#include "runtime/inline_queue.h"
#include "runtime/op_hooks.h"

namespace moebench {

void InlineQueue::enqueue(const char* name, std::function<void()> op, std::string, std::function<void()> on_issue) {
  if (op_hooks::capturing_on_this_thread())
    throw Error(std::string(name) + ": enqueued on the default stream while this thread captures a graph (it would run "
                "now, not in the graph's replays); give it one of the captured streams");
  if (on_issue) on_issue();
  if (const op_hooks::InlineOpLogger log = op_hooks::inline_op_logger()) return log(name, op);
  op();
}

InlineQueue& inline_queue() {
  static InlineQueue queue;
  return queue;
}

}  // namespace moebench
