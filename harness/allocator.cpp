#include "harness/allocator.h"
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

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_; bytes_ = o.bytes_; tag_ = o.tag_; owner_ = o.owner_;
    o.data_ = nullptr; o.bytes_ = 0; o.owner_ = nullptr;
  }
  return *this;
}

void Buffer::release() {
  if (owner_) owner_->free(*this);
  data_ = nullptr;
  bytes_ = 0;
  owner_ = nullptr;
}

TrackingAllocator::TrackingAllocator(Backend backend) : backend_(backend) {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) {
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) baseline_used_ = total_b - free_b;
  }
#endif
}

TrackingAllocator::~TrackingAllocator() = default;

Buffer TrackingAllocator::allocate(std::size_t bytes, MemTag tag) {
  Buffer b;
  b.bytes_ = bytes;
  b.tag_ = tag;
  b.owner_ = this;
  const std::size_t rounded = (bytes + 255) / 256 * 256;  // aligned for vector loads on both backends
  if (rounded == 0) {
    b.owner_ = nullptr;
    return b;
  }
  if (backend_ == Backend::cpu) {
    b.data_ = std::aligned_alloc(256, rounded);
    if (!b.data_)
      throw Error("out of host memory allocating " + format_bytes(double(bytes)) + " for " + mem_tag_name(tag) +
                  " (" + format_bytes(double(current_total_)) + " already held)");
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
  const int t = static_cast<int>(tag);
  current_[t] += bytes;
  peak_[t] = std::max(peak_[t], current_[t]);
  current_total_ += bytes;
  peak_total_ = std::max(peak_total_, current_total_);
  ++allocations_;
  return b;
}

void TrackingAllocator::reserve(Buffer& b, std::size_t bytes, MemTag tag) {
  if (b && b.bytes() >= bytes) return;
  b.release();
  b = allocate(bytes, tag);
}

void TrackingAllocator::free(Buffer& b) {
  if (!b.data_) return;
  if (backend_ == Backend::cpu) {
    std::free(b.data_);
  } else {
#if MOEBENCH_WITH_CUDA
    cudaFree(b.data_);
#endif
  }
  current_[static_cast<int>(b.tag_)] -= b.bytes_;
  current_total_ -= b.bytes_;
}

void TrackingAllocator::reset_peaks() {
  peak_ = current_;
  peak_total_ = current_total_;
}

std::optional<std::int64_t> TrackingAllocator::device_used_delta() const {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) {
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return std::nullopt;
    return static_cast<std::int64_t>(total_b - free_b) - static_cast<std::int64_t>(baseline_used_);
  }
#endif
  return std::nullopt;
}

}  // namespace moebench
