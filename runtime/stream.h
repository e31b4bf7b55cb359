// Streams and events, on both backends. A stream is an in-order queue of work: on CUDA a
// cudaStream_t with its own cuBLAS handle (two streams must not share one), on the CPU a
// CpuQueue served by its own worker thread, so work on two streams runs at once on either
// backend. The device's default stream on the CPU runs each op inline on the calling thread:
// the host itself is that stream. An event marks a point in a stream's queue: record() places
// it, synchronize() waits for it on the host, make_wait(s) makes later work on s wait for it,
// elapsed_ms() is the time between two recorded events once both have completed. Only an event
// made for timing (EventUse::timing) carries a time: the others only order work, which on CUDA
// makes them cheaper to record, wait for and query (cudaEventDisableTiming).
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include "kernels/exec.h"
#include "runtime/cpu_queue.h"
#include "runtime/inline_queue.h"

namespace moebench {

struct Stream {
  Backend backend = Backend::cpu;
  void* handle = nullptr;      // cudaStream_t
  void* blas = nullptr;        // cublasHandle_t bound to this stream once, at creation (cuda)
  void* blas_lt = nullptr;     // cublasLtHandle_t (cuda)
  void* blas_workspace = nullptr;  // the cuBLAS handle's workspace, lent to cuBLASLt calls in stream order
  std::size_t blas_workspace_bytes = 0;
  CpuQueue* queue = nullptr;   // cpu: the stream's worker queue; nullptr: the default stream, which runs each op at once
  int id = 0;                  // 0: the default stream; the timeline track of this stream
  // The host waits for everything enqueued on the stream so far; a failed op's error is thrown.
  void synchronize() const;
  // Whether the stream's work now goes into a graph capture (runtime/stream_graph.h) instead of running.
  bool capturing() const;
};

// Runs `op` in the order of stream `s` on the CPU: on its worker, or now when it has none.
// `details` and `on_issue`: see HostQueue::enqueue.
template <class F>
void run_on(const Stream& s, const char* name, F&& op, std::string details = {}, std::function<void()> on_issue = {}) {
  HostQueue& q = s.queue ? static_cast<HostQueue&>(*s.queue) : inline_queue();
  q.enqueue(name, std::function<void()>(std::forward<F>(op)), std::move(details), std::move(on_issue));
}

struct CpuEventState;

enum class EventUse { ordering, timing };

class Event {
 public:
  explicit Event(Backend backend, EventUse use = EventUse::ordering);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& s);
  void synchronize() const;
  bool query() const;  // completed?
  // Milliseconds from `start` to `stop`; both timing events, both recorded; waits for them.
  static double elapsed_ms(const Event& start, const Event& stop);
  // Makes work later queued on `s` wait for this event (stream-to-stream ordering).
  void make_wait(const Stream& s) const;
  // When the event completed, on the timeline's clock (Timeline::now_us); a timing event; waits for it.
  double time_us() const;
  EventUse use() const { return use_; }
  // CUDA event handles this process has created. A destroyed Event's handle goes back to a free
  // list of its device and use, and the next Event takes it from there: a range makes two events
  // per use, and a driver call to create and one to destroy each would be the host's work
  // between the device's ops.
  static std::size_t cuda_handles_created();

 private:
  void check_timed(const char* what) const;

  Backend backend_;
  EventUse use_;
  bool recorded_ = false;                // a reused CUDA handle's earlier records are not this event's
  int cuda_device_ = 0;                  // whose free list the handle returns to
  void* handle_ = nullptr;               // cudaEvent_t
  std::shared_ptr<CpuEventState> cpu_;   // shared with markers still queued on a CPU stream
};

}  // namespace moebench
