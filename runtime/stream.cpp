// Streams and events: the CPU side, and the switch to the CUDA side (stream_cuda.cpp).
#include "runtime/stream.h"
#include <condition_variable>
#include <mutex>
#include "runtime/timeline.h"

namespace moebench {

namespace detail {
void cuda_stream_synchronize(void* stream);
void* cuda_event_create();
void cuda_event_destroy(void* event);
void cuda_event_record(void* event, void* stream);
void cuda_event_synchronize(void* event);
bool cuda_event_query(void* event);
double cuda_event_elapsed_ms(void* start, void* stop);
void cuda_stream_wait_event(void* stream, void* event);
double cuda_event_time_us(void* event);
}  // namespace detail

// A CPU event: how many times it was recorded and how many of those marks the streams have
// reached, with the clock at the last one reached.
struct CpuEventState {
  std::mutex mutex;
  std::condition_variable reached;
  std::uint64_t recorded = 0, completed = 0;
  double when_us = 0;

  void complete(std::uint64_t mark) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (mark > completed) {
        completed = mark;
        when_us = Timeline::now_us();
      }
    }
    reached.notify_all();
  }
  void wait(std::uint64_t mark) {
    std::unique_lock<std::mutex> lock(mutex);
    reached.wait(lock, [&] { return completed >= mark; });
  }
};

void Stream::synchronize() const {
  if (backend == Backend::cuda) return detail::cuda_stream_synchronize(handle);
  if (queue) queue->synchronize();
}

Event::Event(Backend backend) : backend_(backend) {
  if (backend_ == Backend::cuda)
    handle_ = detail::cuda_event_create();
  else
    cpu_ = std::make_shared<CpuEventState>();
}

Event::~Event() {
  if (handle_) detail::cuda_event_destroy(handle_);
}

Event::Event(Event&& o) noexcept : backend_(o.backend_), handle_(o.handle_), cpu_(std::move(o.cpu_)) { o.handle_ = nullptr; }

Event& Event::operator=(Event&& o) noexcept {
  std::swap(backend_, o.backend_);
  std::swap(handle_, o.handle_);
  std::swap(cpu_, o.cpu_);
  return *this;
}

void Event::record(const Stream& s) {
  if (backend_ == Backend::cuda) return detail::cuda_event_record(handle_, s.handle);
  std::uint64_t mark;
  {
    std::lock_guard<std::mutex> lock(cpu_->mutex);
    mark = ++cpu_->recorded;
  }
  run_on(s, "event", [state = cpu_, mark] { state->complete(mark); });
}

void Event::synchronize() const {
  if (backend_ == Backend::cuda) return detail::cuda_event_synchronize(handle_);
  std::uint64_t mark;
  {
    std::lock_guard<std::mutex> lock(cpu_->mutex);
    mark = cpu_->recorded;
  }
  cpu_->wait(mark);
}

bool Event::query() const {
  if (backend_ == Backend::cuda) return detail::cuda_event_query(handle_);
  std::lock_guard<std::mutex> lock(cpu_->mutex);
  return cpu_->completed >= cpu_->recorded;
}

void Event::make_wait(const Stream& s) const {
  if (backend_ == Backend::cuda) return detail::cuda_stream_wait_event(s.handle, handle_);
  std::uint64_t mark;
  {
    std::lock_guard<std::mutex> lock(cpu_->mutex);
    mark = cpu_->recorded;
  }
  run_on(s, "wait event", [state = cpu_, mark] { state->wait(mark); });
}

double Event::elapsed_ms(const Event& start, const Event& stop) {
  if (start.backend_ == Backend::cuda) return detail::cuda_event_elapsed_ms(start.handle_, stop.handle_);
  start.synchronize();
  stop.synchronize();
  std::lock_guard<std::mutex> a(start.cpu_->mutex);
  if (start.cpu_ == stop.cpu_) return 0.0;
  std::lock_guard<std::mutex> b(stop.cpu_->mutex);
  return (stop.cpu_->when_us - start.cpu_->when_us) / 1e3;
}

double Event::time_us() const {
  if (backend_ == Backend::cuda) return detail::cuda_event_time_us(handle_);
  synchronize();
  std::lock_guard<std::mutex> lock(cpu_->mutex);
  return cpu_->when_us;
}

}  // namespace moebench
