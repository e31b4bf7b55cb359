// A graph captured from CPU streams, the CPU side of runtime/stream_graph.h: the ops their queues
// were given while capturing, in the order they were enqueued, each with its queue, and the
// events recorded and waited for among them as numbered slots. Nothing runs while capturing.
// Enqueue order is an order in which every op follows what it waits for. As on CUDA, the capture
// starts on one stream (the origin); another stream joins it by waiting for an event recorded
// in it (a fork), and must be joined back before the capture ends: its last op followed, through
// event waits, by the origin's end. replay() gives every op to its own queue again (the
// origin's to the stream the replay is launched on), with fresh events for the slots, so the
// streams run a replay as concurrently as they ran the work eagerly, the same ops each time.
#pragma once
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <vector>
#include "kernels/exec.h"
#include "runtime/cpu_queue.h"

namespace moebench {

class CpuCapture {
 public:
  // `origin` starts capturing.
  explicit CpuCapture(CpuQueue* origin);
  ~CpuCapture();  // a capture still open is ended (its members run their ops again)
  CpuCapture(const CpuCapture&) = delete;
  CpuCapture& operator=(const CpuCapture&) = delete;

  // `on_issue` (HostQueue::enqueue) runs at each replay, not now.
  void add_op(CpuQueue* q, const char* name, std::function<void()> op, std::string details,
              std::function<void()> on_issue = {});
  // An event recorded on member `q` now: its slot.
  int record(CpuQueue* q);
  // `q` waits for `slot`; a stream not yet in the capture joins it.
  void wait(CpuQueue* q, int slot);
  bool open() const;
  // Every member stops capturing. Throws Error naming a stream that was not joined back.
  void end();
  // Enqueues the graph: the origin's ops on `onto`, the others' on their own queues, after
  // `onto`'s earlier work; `onto`'s later work follows the whole graph.
  void replay(CpuQueue* onto) const;
  // Ops captured, other than event records and waits.
  std::size_t ops() const;

 private:
  struct Node {
    CpuQueue* queue;
    const char* name;
    std::function<void()> op;  // empty for an event record or wait
    std::string details;
    int record = -1, wait = -1;  // the slot recorded or waited for
    std::function<void()> on_issue;
  };
  std::string unjoined_members() const;  // under mutex_

  mutable std::mutex mutex_;
  CpuQueue* origin_;
  std::vector<CpuQueue*> members_;  // the origin first
  std::vector<Node> nodes_;
  std::vector<std::size_t> recorded_at_;  // per slot, its record's node
  bool open_ = true;
};

}  // namespace moebench
