#include "runtime/allocator.h"
#include <array>
#include <cstdio>
#include <cstdlib>
#include <new>
#if MOEBENCH_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace moebench {

const char* mem_tag_name(MemTag t) {
  switch (t) {
    case MemTag::model_states: return "model_states";
    case MemTag::activations: return "activations";
    case MemTag::buffers: return "buffers";
    case MemTag::temporary: return "temporary";
  }
  return "?";
}

std::string format_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) { b /= 1024.0; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

// What an allocator has handed out; shared by the allocator and every buffer it made.
struct AllocatorBooks {
  Backend backend = Backend::cpu;
  std::array<std::size_t, kMemTagCount> current{}, peak{};
  std::size_t current_total = 0, peak_total = 0;
  std::int64_t allocations = 0;
  std::size_t baseline_used = 0;

  void release(void* data, std::size_t bytes, MemTag tag) {
    if (!data) return;
    if (backend == Backend::cpu) {
      std::free(data);
    } else {
#if MOEBENCH_WITH_CUDA
      cudaFree(data);  // at process exit the runtime may be gone already: nothing to report then
#endif
    }
    current[static_cast<int>(tag)] -= bytes;
    current_total -= bytes;
  }
};

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_; bytes_ = o.bytes_; tag_ = o.tag_; owner_ = std::move(o.owner_);
    o.data_ = nullptr; o.bytes_ = 0; o.owner_.reset();
  }
  return *this;
}

void Buffer::release() {
  if (owner_) owner_->release(data_, bytes_, tag_);
  data_ = nullptr;
  bytes_ = 0;
  owner_.reset();
}

TrackingAllocator::TrackingAllocator(Backend backend) : books_(std::make_shared<AllocatorBooks>()) {
  books_->backend = backend;
#if MOEBENCH_WITH_CUDA
  if (backend == Backend::cuda) {
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) books_->baseline_used = total_b - free_b;
  }
#endif
}

TrackingAllocator::~TrackingAllocator() = default;

Backend TrackingAllocator::backend() const { return books_->backend; }
std::size_t TrackingAllocator::current(MemTag t) const { return books_->current[static_cast<int>(t)]; }
std::size_t TrackingAllocator::peak(MemTag t) const { return books_->peak[static_cast<int>(t)]; }
std::size_t TrackingAllocator::current_total() const { return books_->current_total; }
std::size_t TrackingAllocator::peak_total() const { return books_->peak_total; }
std::int64_t TrackingAllocator::allocations() const { return books_->allocations; }

Buffer TrackingAllocator::allocate(std::size_t bytes, MemTag tag) {
  AllocatorBooks& k = *books_;
  Buffer b;
  b.bytes_ = bytes;
  b.tag_ = tag;
  const std::size_t rounded = (bytes + 255) / 256 * 256;  // aligned for vector loads on both backends
  if (rounded == 0) return b;
  if (k.backend == Backend::cpu) {
    b.data_ = std::aligned_alloc(256, rounded);
    if (!b.data_)
      throw Error("out of host memory allocating " + format_bytes(double(bytes)) + " for " + mem_tag_name(tag) +
                  " (" + format_bytes(double(k.current_total)) + " already held)");
  } else {
#if MOEBENCH_WITH_CUDA
    cudaError_t e = cudaMalloc(&b.data_, rounded);
    if (e != cudaSuccess) {
      cudaGetLastError();
      std::size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      b.data_ = nullptr;
      throw Error("out of GPU memory allocating " + format_bytes(double(bytes)) + " for " + mem_tag_name(tag) + " (" +
                  format_bytes(double(free_b)) + " free of " + format_bytes(double(total_b)) + "): " +
                  cudaGetErrorString(e));
    }
#else
    cuda_not_built("allocate");
#endif
  }
  b.owner_ = books_;
  const int t = static_cast<int>(tag);
  k.current[t] += bytes;
  k.peak[t] = std::max(k.peak[t], k.current[t]);
  k.current_total += bytes;
  k.peak_total = std::max(k.peak_total, k.current_total);
  ++k.allocations;
  return b;
}

void TrackingAllocator::reserve(Buffer& b, std::size_t bytes, MemTag tag) {
  if (b && b.bytes() >= bytes) return;
  b.release();
  b = allocate(bytes, tag);
}

void TrackingAllocator::reset_peaks() {
  books_->peak = books_->current;
  books_->peak_total = books_->current_total;
}

std::optional<std::int64_t> TrackingAllocator::device_used_delta() const {
#if MOEBENCH_WITH_CUDA
  if (books_->backend == Backend::cuda) {
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return std::nullopt;
    return static_cast<std::int64_t>(total_b - free_b) - static_cast<std::int64_t>(books_->baseline_used);
  }
#endif
  return std::nullopt;
}

}  // namespace moebench
