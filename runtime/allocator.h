// The tracking allocator: every buffer goes through it, so current and peak bytes per tag
// (the MPMoE memory categories) are measured, not guessed. Buffers are views of pooled blocks
// with stream-ordered reuse, as a caching allocator does: a freed block goes back to the pool
// of the stream it was allocated on and later work on that stream may reuse it at once; another
// stream takes it only after waiting for an event recorded when it was freed; a block used on
// further streams (record_stream) returns to the pool once their work is done too. Blocks come
// in size classes (runtime/block_size.h), so a request a little larger than last step's finds
// its block again. Blocks are given back to the system only by trim(), or when the system
// refuses an allocation (the cache goes back, then the allocation retries), so no timed
// iteration pays for cudaMalloc or cudaFree. Current and peak per tag count the bytes asked
// for, exactly; reserved_bytes() is what the pool holds. In the poison debug mode
// (set_poison, or MOEBENCH_POOL_POISON=1) freed and freshly handed-out memory is filled with
// 0xFF bytes (NaN as float, -1 as int) in stream order, so a use after free or reuse shows.
// Pinned host blocks (allocate_pinned) are what the device copies to and from asynchronously
// (offloading); they are counted apart from the device tags. On a GPU, device_used_delta() is
// cudaMemGetInfo's view of the same process, to cross-check. A graph capture (runtime/
// stream_graph.h) takes its buffers from blocks of its own (GraphPool).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include "runtime/stream.h"

namespace moebench {

enum class MemTag { model_states, activations, buffers, temporary };
inline constexpr int kMemTagCount = 4;
const char* mem_tag_name(MemTag t);

struct Pool;
struct Block;

// Owning, move-only view of a pooled block, of one tag.
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
  // Work on `s` (other than the stream the buffer was allocated on) uses it: its block is
  // reused only once that work is done as well.
  void record_stream(const Stream& s);
  // Back to the pool (stream-ordered); the buffer is empty afterwards.
  void release();

 private:
  friend struct Pool;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  MemTag tag_ = MemTag::temporary;
  Block* block_ = nullptr;
  std::shared_ptr<Pool> pool_;  // a buffer may outlive the allocator object it came from
};

// The blocks a graph's capture took. While the capture is open, a buffer allocated on a stream
// being captured comes from a block of the graph's own -- a fresh one, or one freed earlier in
// the capture -- never from the pool's others, whose last users the graph would not wait for. A
// block freed in the capture, or later by a buffer the capture handed out, stays the graph's:
// every replay writes it again, so nothing else may be given it. When the GraphPool goes (after
// the graph's last replay has completed, outside any capture) its blocks return to the pool.
class GraphPool {
 public:
  GraphPool() = default;
  GraphPool(GraphPool&& o) noexcept { *this = std::move(o); }
  GraphPool& operator=(GraphPool&& o) noexcept;
  ~GraphPool() { release(); }
  // Device bytes of the blocks the graph holds, in use or not.
  std::size_t reserved_bytes() const;

 private:
  friend class TrackingAllocator;
  void release();
  std::shared_ptr<Pool> pool_;
  std::uint64_t id_ = 0;
};

class TrackingAllocator {
 public:
  // `default_stream`: what allocate() without a stream means: the device's default stream, which
  // on cuda it must be (Device::default_stream()).
  explicit TrackingAllocator(Backend backend, Stream default_stream = {});
  TrackingAllocator(const TrackingAllocator&) = delete;
  TrackingAllocator& operator=(const TrackingAllocator&) = delete;
  ~TrackingAllocator();

  // Throws Error naming the tag and the sizes if the memory is not there.
  Buffer allocate(std::size_t bytes, MemTag tag);
  Buffer allocate(std::size_t bytes, MemTag tag, const Stream& s);
  // Host memory the device copies to and from asynchronously (pinned on CUDA).
  Buffer allocate_pinned(std::size_t bytes, MemTag tag, const Stream& s);
  // Keeps `b` if it holds at least `bytes`, else replaces it (contents are not kept): per-step
  // buffers are allocated once and grow, so steps do not pay for allocation.
  void reserve(Buffer& b, std::size_t bytes, MemTag tag);
  void reserve(Buffer& b, std::size_t bytes, MemTag tag, const Stream& s);

  Backend backend() const;
  std::size_t current(MemTag t) const;
  std::size_t peak(MemTag t) const;
  std::size_t current_total() const;
  std::size_t peak_total() const;
  std::int64_t allocations() const;         // allocate calls
  std::int64_t system_allocations() const;  // blocks taken from the system (cudaMalloc, aligned_alloc, ...)
  std::size_t reserved_bytes() const;       // device bytes the pool holds, in use or cached
  std::size_t pinned_current() const;
  std::size_t pinned_peak() const;
  // Peaks restart from the current values (e.g. after set-up, before a measured step).
  void reset_peaks();
  // Gives every cached block back to the system (waits for their streams).
  void trim();
  void set_poison(bool on);
  // Opens a graph capture's pool (one capture at a time), before the capture begins;
  // end_capture() closes it once the capture has ended. Throws Error if one is open already.
  GraphPool begin_capture();
  void end_capture();
  // GPU bytes in use now minus at construction, per cudaMemGetInfo; nullopt on the CPU.
  std::optional<std::int64_t> device_used_delta() const;

 private:
  std::shared_ptr<Pool> pool_;
};

std::string format_bytes(double bytes);

}  // namespace moebench
