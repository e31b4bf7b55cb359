// Streams and events: the CUDA side (CUDA events on CUDA streams); stubs without CUDA.
#include "runtime/stream.h"
#include "runtime/timeline.h"
#if MOEBENCH_WITH_CUDA
#include <cuda_runtime.h>
#include <map>
#include <mutex>
#include <utility>
#include <vector>
#include "kernels/cuda_check.cuh"
#include "runtime/cuda_stream.h"
#include "runtime/peer_wait.h"
#endif

namespace moebench::detail {

#if MOEBENCH_WITH_CUDA
static cudaEvent_t ce(void* e) { return static_cast<cudaEvent_t>(e); }

// The host's waits for the device: the work waited for may hold NCCL's kernels, which wait for
// their peers, so each wait has the watchdog's deadline and polls the communicators' errors.
template <class Query>
static void wait_for_device(const char* operation, Query query) {
  wait_for_peers(operation, [&] {
    const cudaError_t e = query();
    if (e == cudaErrorNotReady) return false;
    MOEBENCH_CUDA_CHECK(e);
    return true;
  });
}
void cuda_stream_synchronize(void* stream) {
  wait_for_device("stream synchronize (cuda)", [s = cuda_stream(stream)] { return cudaStreamQuery(s); });
}
// Destroyed events' handles, per device and use, for the next events to take (Event::
// cuda_handles_created). Leaked on purpose: events may be destroyed during static destruction.
struct EventHandles {
  std::mutex mutex;
  std::map<std::pair<int, bool>, std::vector<cudaEvent_t>> free;  // (device, timing)
  std::size_t created = 0;
};
static EventHandles& event_handles() {
  static auto* handles = new EventHandles;
  return *handles;
}
void* cuda_event_create(bool timing, int* device_out) {
  EventHandles& h = event_handles();
  int device = 0;
  MOEBENCH_CUDA_CHECK(cudaGetDevice(&device));
  *device_out = device;
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    auto& list = h.free[{device, timing}];
    if (!list.empty()) {
      cudaEvent_t e = list.back();
      list.pop_back();
      return e;
    }
  }
  cudaEvent_t e;
  MOEBENCH_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  std::lock_guard<std::mutex> lock(h.mutex);
  ++h.created;
  return e;
}
// The handle's last record may still be pending: a later record by its next owner replaces it, as
// on any reused event, and waits enqueued before then keep the record they were given.
void cuda_event_destroy(void* event, bool timing, int device) {
  EventHandles& h = event_handles();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.free[{device, timing}].push_back(ce(event));
}
std::size_t cuda_event_handles_created() {
  EventHandles& h = event_handles();
  std::lock_guard<std::mutex> lock(h.mutex);
  return h.created;
}
void cuda_event_record(void* event, void* stream) { MOEBENCH_CUDA_CHECK(cudaEventRecord(ce(event), cuda_stream(stream))); }
void cuda_event_synchronize(void* event) {
  wait_for_device("event synchronize (cuda)", [e = ce(event)] { return cudaEventQuery(e); });
}
bool cuda_event_query(void* event) {
  const cudaError_t e = cudaEventQuery(ce(event));
  if (e == cudaErrorNotReady) return false;
  MOEBENCH_CUDA_CHECK(e);
  return true;
}
double cuda_event_elapsed_ms(void* start, void* stop) {
  cuda_event_synchronize(stop);
  float ms = 0.f;
  MOEBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, ce(start), ce(stop)));
  return ms;
}
void cuda_stream_wait_event(void* stream, void* event) { MOEBENCH_CUDA_CHECK(cudaStreamWaitEvent(cuda_stream(stream), ce(event), 0)); }
bool cuda_stream_capturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  MOEBENCH_CUDA_CHECK(cudaStreamIsCapturing(cuda_stream(stream), &status));
  return status != cudaStreamCaptureStatusNone;
}

// GPU time on the host clock: an event recorded once, with the host time it completed at.
double cuda_event_time_us(void* event) {
  static std::once_flag once;
  static cudaEvent_t base;
  static double base_us = 0;
  std::call_once(once, [] {
    MOEBENCH_CUDA_CHECK(cudaEventCreate(&base));
    MOEBENCH_CUDA_CHECK(cudaEventRecord(base, nullptr));
    MOEBENCH_CUDA_CHECK(cudaEventSynchronize(base));
    base_us = Timeline::now_us();
  });
  cuda_event_synchronize(event);
  float ms = 0.f;
  MOEBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, base, ce(event)));
  return base_us + double(ms) * 1e3;
}
#else
void cuda_stream_synchronize(void*) { cuda_not_built("stream"); }
void* cuda_event_create(bool, int*) { cuda_not_built("Event"); }
void cuda_event_destroy(void*, bool, int) {}
std::size_t cuda_event_handles_created() { return 0; }
void cuda_event_record(void*, void*) { cuda_not_built("Event"); }
void cuda_event_synchronize(void*) { cuda_not_built("Event"); }
bool cuda_event_query(void*) { cuda_not_built("Event"); }
double cuda_event_elapsed_ms(void*, void*) { cuda_not_built("Event"); }
void cuda_stream_wait_event(void*, void*) { cuda_not_built("Event"); }
double cuda_event_time_us(void*) { cuda_not_built("Event"); }
bool cuda_stream_capturing(void*) { cuda_not_built("stream"); }
#endif

}  // namespace moebench::detail
