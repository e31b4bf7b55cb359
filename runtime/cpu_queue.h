// The work queue behind a CPU stream: ops run in the order they were enqueued, one at a time,
// on the queue's own worker thread, so two streams run at once as on a GPU. An op that throws
// marks the queue failed (as a CUDA error is sticky): later ops are skipped and every
// synchronize() reports the first failure. Each op can be recorded into the timeline. While a
// graph is captured (runtime/cpu_capture.h) the ops enqueued go into it instead of running, as
// a capturing CUDA stream makes graph nodes of its work, and the host may not wait for the queue.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include "kernels/exec.h"

namespace moebench {

class CpuCapture;  // runtime/cpu_capture.h

class CpuQueue final : public HostQueue {
 public:
  // `track`: the timeline track (stream id) its ops are recorded under.
  CpuQueue(std::string name, int track);
  ~CpuQueue() override;  // runs what is queued, then joins the worker
  CpuQueue(const CpuQueue&) = delete;
  CpuQueue& operator=(const CpuQueue&) = delete;

  void enqueue(const char* name, std::function<void()> op, std::string details = {},
               std::function<void()> on_issue = {}) override;
  bool recording() const override;
  void synchronize() override;
  void synchronize_without_deadline() override;
  // The graph capture the ops now go into instead of running, or nullptr.
  CpuCapture* capture() const;
  // From now on ops go into `into` (nullptr: they run again).
  void set_capture(CpuCapture* into);
  const std::string& name() const override { return name_; }

 private:
  struct Task {
    const char* name;
    std::function<void()> op;
    std::string details;
    bool logged = false;  // into the kernel log (runtime/kernel_log.h), under `path`, in `run`
    std::string path;
    int run = 0;
  };
  void work();

  void wait_for_all(std::unique_lock<std::mutex>& lock);

  std::string name_;
  std::string synchronize_label_, teardown_label_;  // the watchdog's names of the two waits
  int track_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<Task> tasks_;
  std::uint64_t enqueued_ = 0, completed_ = 0;
  // The earliest count of completed ops a synchronize() waits for: the worker notifies there
  // only (a notification per op woke a waiting host thread for every op: ~2 us of the worker's
  // time per op, and on shared cores a context switch each).
  static constexpr std::uint64_t kNobodyWaits = ~std::uint64_t(0);
  std::uint64_t wake_at_ = kNobodyWaits;
  std::optional<std::string> failure_;
  CpuCapture* capture_ = nullptr;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace moebench
