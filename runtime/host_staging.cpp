#include "runtime/host_staging.h"
#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>
#if MOEBENCH_WITH_CUDA
#include <cuda_runtime.h>
#include "kernels/cuda_check.cuh"
#endif

namespace moebench {

#if MOEBENCH_WITH_CUDA
namespace detail {
void cuda_event_synchronize(void* event);  // polled, under the deadline of runtime/peer_wait.h (stream_cuda.cpp)
}
#endif

HostStaging::HostStaging(const Device& dev) : backend_(dev.backend()) {}

HostStaging::~HostStaging() {
#if MOEBENCH_WITH_CUDA
  for (Slot& slot : slots_) {
    if (slot.last_copy) {
      try {
        detail::cuda_event_synchronize(slot.last_copy);
      } catch (const std::exception&) {
        // A failed device: its error was reported where it happened; the slot is freed all the same.
      }
      cudaEventDestroy(static_cast<cudaEvent_t>(slot.last_copy));
    }
    if (slot.pinned) cudaFreeHost(slot.pinned);
  }
  for (void* p : retired_) cudaFreeHost(p);
#endif
}

void HostStaging::upload(void* dst, const void* src, std::size_t bytes, const Stream& s) {
  if (bytes == 0) return;
  if (backend_ == Backend::cpu) {
    if (!s.queue) {
      std::memcpy(dst, src, bytes);
      return;
    }
    auto data = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
    run_on(s, "upload", [dst, data] { std::memcpy(dst, data->data(), data->size()); });
    return;
  }
#if MOEBENCH_WITH_CUDA
  Slot& slot = slots_[next_];
  next_ = (next_ + 1) % kSlots;
  auto done = static_cast<cudaEvent_t>(slot.last_copy);
  if (!done) {
    MOEBENCH_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    slot.last_copy = done;
  } else {
    detail::cuda_event_synchronize(done);  // the copy kSlots uploads ago has read the slot
  }
  if (bytes > slot.capacity) {
    // cudaFreeHost waits for the whole device, with no deadline, and the device may hold kernels
    // waiting on a stopped peer: an outgrown buffer is kept until the staging is destroyed.
    if (slot.pinned) retired_.push_back(slot.pinned);
    const std::size_t grown = std::max(bytes, 2 * slot.capacity);  // what is retired stays below what is held
    slot.pinned = nullptr;
    slot.capacity = 0;
    MOEBENCH_CUDA_CHECK(cudaMallocHost(&slot.pinned, grown));
    slot.capacity = grown;
  }
  std::memcpy(slot.pinned, src, bytes);
  const auto stream = static_cast<cudaStream_t>(s.handle);
  MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(dst, slot.pinned, bytes, cudaMemcpyHostToDevice, stream));
  MOEBENCH_CUDA_CHECK(cudaEventRecord(done, stream));
#else
  (void)dst; (void)src; (void)s;
  cuda_not_built("HostStaging::upload");
#endif
}

}  // namespace moebench
