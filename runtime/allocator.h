// The tracking allocator: every buffer goes through it, so current and peak bytes per tag
// (the MPMoE memory categories) are measured, not guessed. On a GPU, device_used_delta()
// is cudaMemGetInfo's view of the same process, to cross-check. A buffer shares ownership of
// its allocator's books, so it may outlive the allocator object (a bench member freed after
// main's locals): it is still released with the right backend and counted where it came from.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include "runtime/device.h"

namespace moebench {

enum class MemTag { model_states, activations, buffers, temporary };
inline constexpr int kMemTagCount = 4;
const char* mem_tag_name(MemTag t);

class TrackingAllocator;
struct AllocatorBooks;

// Owning, move-only handle to device (or host) memory of one tag.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { release(); }

  void* data() const { return data_; }
  template <class T> T* as() const { return static_cast<T*>(data_); }
  std::size_t bytes() const { return bytes_; }
  MemTag tag() const { return tag_; }
  explicit operator bool() const { return data_ != nullptr; }
  void release();

 private:
  friend class TrackingAllocator;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  MemTag tag_ = MemTag::temporary;
  std::shared_ptr<AllocatorBooks> owner_;
};

class TrackingAllocator {
 public:
  explicit TrackingAllocator(Backend backend);
  TrackingAllocator(const TrackingAllocator&) = delete;
  TrackingAllocator& operator=(const TrackingAllocator&) = delete;
  ~TrackingAllocator();

  // Throws Error naming the tag and the sizes if the memory is not there.
  Buffer allocate(std::size_t bytes, MemTag tag);
  // Keeps `b` if it holds at least `bytes`, else replaces it (contents are not kept): per-step
  // buffers are allocated once and grow, so steps do not pay for allocation.
  void reserve(Buffer& b, std::size_t bytes, MemTag tag);

  Backend backend() const;
  std::size_t current(MemTag t) const;
  std::size_t peak(MemTag t) const;
  std::size_t current_total() const;
  std::size_t peak_total() const;
  std::int64_t allocations() const;
  // Peaks restart from the current values (e.g. after set-up, before a measured step).
  void reset_peaks();
  // GPU bytes in use now minus at construction, per cudaMemGetInfo; nullopt on the CPU.
  std::optional<std::int64_t> device_used_delta() const;

 private:
  std::shared_ptr<AllocatorBooks> books_;
};

std::string format_bytes(double bytes);

}  // namespace moebench
