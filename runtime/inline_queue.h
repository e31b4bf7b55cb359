// The queue of the CPU's default stream: each op runs at once, on the calling thread, as the host
// itself is that stream. Inline work is watched here, once: an op given while this thread
// captures a graph is refused (it would run now and never in a replay, as CUDA refuses
// legacy-stream work while a thread captures), and while the kernel log logs the CPU's ops each
// op is timed and recorded under the calling thread's range.
#pragma once
#include <string>
#include "kernels/exec.h"

namespace moebench {

class InlineQueue final : public HostQueue {
 public:
  void enqueue(const char* name, std::function<void()> op, std::string details = {},
               std::function<void()> on_issue = {}) override;
  bool recording() const override { return false; }  // nothing is queued: no timeline entry waits for details
  const std::string& name() const override { return name_; }
  void synchronize() override {}  // every op has run when enqueue returns
  void synchronize_without_deadline() override {}

 private:
  std::string name_ = "default";
};

// The one queue every CPU default stream shares: it holds no state of its own.
InlineQueue& inline_queue();

}  // namespace moebench
