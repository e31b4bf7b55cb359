#include "runtime/host_staging.h"
#include <cstring>
#include <memory>
#include <vector>
#if MOEBENCH_WITH_CUDA
#include <cuda_runtime.h>
#include "kernels/cuda_check.cuh"
#endif

namespace moebench {

HostStaging::HostStaging(const Device& dev) : backend_(dev.backend()) {}

HostStaging::~HostStaging() {
#if MOEBENCH_WITH_CUDA
  if (last_copy_) {
    cudaEventSynchronize(static_cast<cudaEvent_t>(last_copy_));
    cudaEventDestroy(static_cast<cudaEvent_t>(last_copy_));
  }
  if (pinned_) cudaFreeHost(pinned_);
#endif
}

void HostStaging::upload(void* dst, const void* src, std::size_t bytes, const Stream& s) {
  if (bytes == 0) return;
  if (backend_ == Backend::cpu) {
    if (!s.queue) return std::memcpy(dst, src, bytes), void();
    auto data = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
    run_on(s, "upload", [dst, data] { std::memcpy(dst, data->data(), data->size()); });
    return;
  }
#if MOEBENCH_WITH_CUDA
  auto done = static_cast<cudaEvent_t>(last_copy_);
  if (!done) {
    MOEBENCH_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    last_copy_ = done;
  } else {
    MOEBENCH_CUDA_CHECK(cudaEventSynchronize(done));  // the previous copy has read the block
  }
  if (bytes > capacity_) {
    if (pinned_) MOEBENCH_CUDA_CHECK(cudaFreeHost(pinned_));
    pinned_ = nullptr;
    capacity_ = 0;
    MOEBENCH_CUDA_CHECK(cudaMallocHost(&pinned_, bytes));
    capacity_ = bytes;
  }
  std::memcpy(pinned_, src, bytes);
  const auto stream = static_cast<cudaStream_t>(s.handle);
  MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(dst, pinned_, bytes, cudaMemcpyHostToDevice, stream));
  MOEBENCH_CUDA_CHECK(cudaEventRecord(done, stream));
#else
  (void)dst; (void)src; (void)s;
  cuda_not_built("HostStaging::upload");
#endif
}

}  // namespace moebench
