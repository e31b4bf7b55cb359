// Streams and events: the CUDA side (CUDA events on CUDA streams); stubs without CUDA.
#include "runtime/stream.h"
#include "runtime/timeline.h"
#if MOEBENCH_WITH_CUDA
#include <cuda_runtime.h>
#include <mutex>
#include "kernels/cuda_check.cuh"
#include "runtime/cuda_stream.h"
#endif

namespace moebench::detail {

#if MOEBENCH_WITH_CUDA
static cudaEvent_t ce(void* e) { return static_cast<cudaEvent_t>(e); }

void cuda_stream_synchronize(void* stream) { MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(cuda_stream(stream))); }
void* cuda_event_create() {
  cudaEvent_t e;
  MOEBENCH_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}
void cuda_event_destroy(void* event) { cudaEventDestroy(ce(event)); }
void cuda_event_record(void* event, void* stream) { MOEBENCH_CUDA_CHECK(cudaEventRecord(ce(event), cuda_stream(stream))); }
void cuda_event_synchronize(void* event) { MOEBENCH_CUDA_CHECK(cudaEventSynchronize(ce(event))); }
bool cuda_event_query(void* event) {
  const cudaError_t e = cudaEventQuery(ce(event));
  if (e == cudaErrorNotReady) return false;
  MOEBENCH_CUDA_CHECK(e);
  return true;
}
double cuda_event_elapsed_ms(void* start, void* stop) {
  MOEBENCH_CUDA_CHECK(cudaEventSynchronize(ce(stop)));
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
  MOEBENCH_CUDA_CHECK(cudaEventSynchronize(ce(event)));
  float ms = 0.f;
  MOEBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, base, ce(event)));
  return base_us + double(ms) * 1e3;
}
#else
void cuda_stream_synchronize(void*) { cuda_not_built("stream"); }
void* cuda_event_create() { cuda_not_built("Event"); }
void cuda_event_destroy(void*) {}
void cuda_event_record(void*, void*) { cuda_not_built("Event"); }
void cuda_event_synchronize(void*) { cuda_not_built("Event"); }
bool cuda_event_query(void*) { cuda_not_built("Event"); }
double cuda_event_elapsed_ms(void*, void*) { cuda_not_built("Event"); }
void cuda_stream_wait_event(void*, void*) { cuda_not_built("Event"); }
double cuda_event_time_us(void*) { cuda_not_built("Event"); }
bool cuda_stream_capturing(void*) { cuda_not_built("stream"); }
#endif

}  // namespace moebench::detail
