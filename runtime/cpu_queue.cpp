#include "runtime/cpu_queue.h"
#include <algorithm>
#include "runtime/cpu_capture.h"
#include "runtime/kernel_log.h"
#include "runtime/range.h"
#include "runtime/timeline.h"
#include "runtime/watchdog.h"

namespace moebench {

CpuQueue::CpuQueue(std::string name, int track)
    : name_(std::move(name)),
      synchronize_label_("stream " + name_ + " synchronize (cpu)"),
      teardown_label_("stream " + name_ + ": its end waits for the ops queued on it (cpu)"),
      track_(track),
      worker_([this] { work(); }) {}

CpuQueue::~CpuQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  Watchdog::Scope watch(teardown_label_.c_str());  // an op waiting for a stopped peer ends the process here
  worker_.join();
}

void CpuQueue::enqueue(const char* name, std::function<void()> op, std::string details,
                       std::function<void()> on_issue) {
  if (CpuCapture* graph = capture()) {  // outside the queue's lock: the capture locks its own
    graph->add_op(this, name, std::move(op), std::move(details), std::move(on_issue));
    return;
  }
  if (on_issue) on_issue();
  Task task{name, std::move(op), std::move(details), false, {}};
  if (KernelLog::on() && !PoolPoisoning::on_this_thread() && KernelLog::current_run() != KernelLog::kNoRun) {
    task.logged = true;  // the range and the run are the enqueuing thread's
    task.path = current_range_path();
    task.run = KernelLog::current_run();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    ++enqueued_;
  }
  wake_.notify_one();
}

bool CpuQueue::recording() const { return Timeline::enabled(); }

CpuCapture* CpuQueue::capture() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_;
}

void CpuQueue::set_capture(CpuCapture* into) {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = into;
}

void CpuQueue::synchronize() {
  Watchdog::Scope watch(synchronize_label_.c_str());
  std::unique_lock<std::mutex> lock(mutex_);
  wait_for_all(lock);
}

void CpuQueue::synchronize_without_deadline() {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_for_all(lock);
}

void CpuQueue::wait_for_all(std::unique_lock<std::mutex>& lock) {
  if (capture_)
    throw Error("stream " + name_ + ": the host waits for it while its work is captured into a graph (a captured step "
                "must not wait on the host: on CUDA this invalidates the capture)");
  const std::uint64_t target = enqueued_;
  while (completed_ < target) {
    wake_at_ = std::min(wake_at_, target);  // the worker wakes the waiters there, not after every op
    done_.wait(lock);
  }
  if (failure_) throw Error("stream " + name_ + ": " + *failure_);
}

void CpuQueue::work() {
  for (;;) {
    Task task;
    bool skip = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
      skip = failure_.has_value();
    }
    if (!skip) {
      const double start = Timeline::now_us();
      try {
        task.op();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex_);
        failure_ = std::string(task.name) + ": " + e.what();
      }
      // What the enqueuer knew (sizes, pointers) and what the op learnt running (a communicator's bytes).
      std::string args = Timeline::take_op_args();
      if (!task.details.empty()) args = args.empty() ? std::move(task.details) : task.details + ", " + args;
      const double end = Timeline::now_us();
      Timeline::record_op(track_, task.name, start, end, args);
      if (task.logged) KernelLog::record_cpu(task.name, std::move(task.path), task.run, start, end);
    }
    bool reached = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++completed_;
      if (completed_ >= wake_at_) {
        reached = true;
        wake_at_ = kNobodyWaits;  // a waiter whose own target is later registers it again
      }
    }
    if (reached) done_.notify_all();
  }
}

}  // namespace moebench
