// Streams and events: the CPU side, and the switch to the CUDA side (stream_cuda.cpp).
#include "runtime/stream.h"
#include <condition_variable>
#include <mutex>
#include "runtime/cpu_capture.h"
#include "runtime/timeline.h"
#include "runtime/watchdog.h"

namespace moebench {

namespace detail {
void cuda_stream_synchronize(void* stream);
void* cuda_event_create(bool timing, int* device);
void cuda_event_destroy(void* event, bool timing, int device);
std::size_t cuda_event_handles_created();
void cuda_event_record(void* event, void* stream);
void cuda_event_synchronize(void* event);
bool cuda_event_query(void* event);
double cuda_event_elapsed_ms(void* start, void* stop);
void cuda_stream_wait_event(void* stream, void* event);
double cuda_event_time_us(void* event);
bool cuda_stream_capturing(void* stream);
}  // namespace detail

// A CPU event: how many times it was recorded and how many of those marks the streams have
// reached, with the clock at the last one reached; or, when it was last recorded on a stream
// being captured, that capture and its slot there. As on CUDA, such an event is part of the
// graph: the host cannot wait for it, a stream outside the capture that waits for it joins the
// capture while it is open, and a capturing stream cannot wait for an event recorded outside
// (what came before the capture reaches it through stream order alone).
struct CpuEventState {
  std::mutex mutex;
  std::condition_variable reached;
  std::uint64_t recorded = 0, completed = 0;
  double when_us = 0;
  CpuCapture* captured_by = nullptr;
  int slot = -1;

  void check_host_may_wait() const {
    if (captured_by)
      throw Error("the host waits for an event last recorded on a stream being captured into a graph (it is a point in "
                  "the graph, not in time; on CUDA: cudaErrorCapturedEvent)");
  }

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

bool Stream::capturing() const {
  if (backend == Backend::cuda) return handle && detail::cuda_stream_capturing(handle);
  return queue && queue->capture();
}

Event::Event(Backend backend, EventUse use) : backend_(backend), use_(use) {
  if (backend_ == Backend::cuda)
    handle_ = detail::cuda_event_create(use_ == EventUse::timing, &cuda_device_);
  else
    cpu_ = std::make_shared<CpuEventState>();
}

Event::~Event() {
  if (handle_) detail::cuda_event_destroy(handle_, use_ == EventUse::timing, cuda_device_);
}

Event::Event(Event&& o) noexcept
    : backend_(o.backend_),
      use_(o.use_),
      recorded_(o.recorded_),
      cuda_device_(o.cuda_device_),
      handle_(o.handle_),
      cpu_(std::move(o.cpu_)) {
  o.handle_ = nullptr;
}

Event& Event::operator=(Event&& o) noexcept {
  std::swap(backend_, o.backend_);
  std::swap(use_, o.use_);
  std::swap(recorded_, o.recorded_);
  std::swap(cuda_device_, o.cuda_device_);
  std::swap(handle_, o.handle_);
  std::swap(cpu_, o.cpu_);
  return *this;
}

std::size_t Event::cuda_handles_created() { return detail::cuda_event_handles_created(); }

void Event::check_timed(const char* what) const {
  if (use_ != EventUse::timing)
    throw Error(std::string(what) + ": an ordering event has no time (make it with EventUse::timing)");
  if (!recorded_) throw Error(std::string(what) + ": the event was never recorded");
}

void Event::record(const Stream& s) {
  recorded_ = true;
  if (backend_ == Backend::cuda) return detail::cuda_event_record(handle_, s.handle);
  if (CpuCapture* graph = s.queue ? s.queue->capture() : nullptr) {
    const int slot = graph->record(s.queue);
    std::lock_guard<std::mutex> lock(cpu_->mutex);
    cpu_->captured_by = graph;
    cpu_->slot = slot;
    return;
  }
  std::uint64_t mark;
  {
    std::lock_guard<std::mutex> lock(cpu_->mutex);
    cpu_->captured_by = nullptr;
    mark = ++cpu_->recorded;
  }
  run_on(s, "event", [state = cpu_, mark] { state->complete(mark); });
}

void Event::synchronize() const {
  if (backend_ == Backend::cuda) {
    if (recorded_) detail::cuda_event_synchronize(handle_);
    return;
  }
  std::uint64_t mark;
  {
    std::lock_guard<std::mutex> lock(cpu_->mutex);
    cpu_->check_host_may_wait();
    mark = cpu_->recorded;
  }
  Watchdog::Scope watch("event synchronize (cpu)");  // as CUDA's polled event wait
  cpu_->wait(mark);
}

bool Event::query() const {
  if (backend_ == Backend::cuda) return !recorded_ || detail::cuda_event_query(handle_);
  std::lock_guard<std::mutex> lock(cpu_->mutex);
  cpu_->check_host_may_wait();
  return cpu_->completed >= cpu_->recorded;
}

void Event::make_wait(const Stream& s) const {
  if (backend_ == Backend::cuda) {
    if (recorded_) detail::cuda_stream_wait_event(s.handle, handle_);
    return;
  }
  CpuCapture* mine = s.queue ? s.queue->capture() : nullptr;
  CpuCapture* theirs;
  int slot;
  std::uint64_t mark;
  {
    std::lock_guard<std::mutex> lock(cpu_->mutex);
    theirs = cpu_->captured_by;
    slot = cpu_->slot;
    mark = cpu_->recorded;
  }
  if (theirs) {
    if (mine && mine != theirs)
      throw Error("a stream being captured waits for an event of another capture (on CUDA: cudaErrorStreamCaptureMerge)");
    if (!theirs->open())
      throw Error("a stream waits for an event last recorded in a graph capture that has ended (record it again outside; "
                  "on CUDA: cudaErrorCapturedEvent)");
    if (!s.queue)
      throw Error("the default stream waits for an event recorded in a graph capture (it cannot join one: it runs its "
                  "work at once)");
    return theirs->wait(s.queue, slot);
  }
  if (mine) {
    if (mark == 0) return;  // never recorded: nothing to wait for, as on CUDA
    throw Error("stream " + s.queue->name() + ": being captured, it waits for an event recorded outside the capture (only "
                "stream order crosses a capture's boundary; on CUDA: cudaErrorStreamCaptureIsolation)");
  }
  run_on(s, "wait event", [state = cpu_, mark] { state->wait(mark); });
}

double Event::elapsed_ms(const Event& start, const Event& stop) {
  start.check_timed("Event::elapsed_ms (start)");
  stop.check_timed("Event::elapsed_ms (stop)");
  if (start.backend_ == Backend::cuda) return detail::cuda_event_elapsed_ms(start.handle_, stop.handle_);
  start.synchronize();
  stop.synchronize();
  std::lock_guard<std::mutex> a(start.cpu_->mutex);
  if (start.cpu_ == stop.cpu_) return 0.0;
  std::lock_guard<std::mutex> b(stop.cpu_->mutex);
  return (stop.cpu_->when_us - start.cpu_->when_us) / 1e3;
}

double Event::time_us() const {
  check_timed("Event::time_us");
  if (backend_ == Backend::cuda) return detail::cuda_event_time_us(handle_);
  synchronize();
  std::lock_guard<std::mutex> lock(cpu_->mutex);
  return cpu_->when_us;
}

}  // namespace moebench
