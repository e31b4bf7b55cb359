#include "runtime/allocator.h"
#include "runtime/block_size.h"
#include "runtime/kernel_log.h"
#include "runtime/watchdog.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>
#if MOEBENCH_WITH_CUDA
#include <cuda_runtime.h>
#include "kernels/cuda_check.cuh"
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

// The order a stream's work runs in: its id with its CUDA stream, or with its CPU worker
// (nullptr: the calling thread). The id alone is a timeline track, and every device's default
// stream is track 0; the handle alone could be a destroyed stream's, reused. A block freed on
// one stream is reused at once only by work that runs after it.
using StreamOrder = std::pair<int, const void*>;
static StreamOrder order_of(const Stream& s) {
  return {s.id, s.backend == Backend::cuda ? s.handle : static_cast<const void*>(s.queue)};
}
static bool same_order(const Stream& a, const Stream& b) { return a.backend == b.backend && order_of(a) == order_of(b); }

// A piece of memory taken from the system once and handed out again and again.
struct Block {
  void* ptr = nullptr;
  std::size_t size = 0;
  bool pinned = false;
  Stream owner;                                   // the stream whose pool it returns to
  std::vector<Stream> also_used_on;               // record_stream()
  std::unique_ptr<Event> freed;                   // recorded on the owner when freed (for other streams)
  std::vector<std::unique_ptr<Event>> pending;    // recorded on also_used_on when freed
  bool in_use = false;
  std::uint64_t graph = 0;                        // the graph whose pool holds it (GraphPool), or 0
};

// Everything an allocator has: its blocks, free lists per stream, and its books. Shared with
// every buffer it handed out.
struct Pool {
  Backend backend = Backend::cpu;
  Stream default_stream;
  bool poison = false;
  std::mutex mutex;
  std::vector<std::unique_ptr<Block>> blocks;
  std::map<StreamOrder, std::multimap<std::size_t, Block*>> free_lists;  // order_of(stream) -> size -> block
  std::vector<Block*> deferred;                                  // waiting for other streams' work
  std::uint64_t capturing = 0, next_graph = 1;                   // the graph whose capture is open (0: none)
  std::map<std::uint64_t, std::multimap<std::size_t, Block*>> graph_free;  // graph -> its free blocks
  std::array<std::size_t, kMemTagCount> current{}, peak{};
  std::size_t current_total = 0, peak_total = 0, reserved = 0, pinned_current = 0, pinned_peak = 0;
  std::int64_t allocations = 0, system_allocations = 0;
  std::size_t baseline_used = 0;

  // Work queued before a block was given back (its users', a poison fill) may still be running
  // when the last buffer goes: wait for it before the memory goes back to the system.
  ~Pool() {
    for (auto& b : blocks) {
      if (b->freed) b->freed->synchronize();
      for (const auto& e : b->pending) e->synchronize();
      system_free(*b);
    }
  }

  // A stream whose position an event can mark (the CUDA legacy stream is not one of ours).
  bool can_mark(const Stream& s) const { return s.backend == Backend::cpu || s.handle != nullptr; }

  void* system_alloc(std::size_t bytes, bool pinned) {
    void* p = nullptr;
    if (backend == Backend::cpu) {
      p = std::aligned_alloc(256, bytes);
    } else {
#if MOEBENCH_WITH_CUDA
      // During a capture the thread's mode refuses cudaMalloc; the graph gets the new addresses
      // and its replays allocate nothing (the block is never freed while the graph lives).
      cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
      if (capturing) cudaThreadExchangeStreamCaptureMode(&mode);
      const cudaError_t e = pinned ? cudaMallocHost(&p, bytes) : cudaMalloc(&p, bytes);
      if (capturing) cudaThreadExchangeStreamCaptureMode(&mode);
      if (e != cudaSuccess) {
        cudaGetLastError();
        p = nullptr;
      }
#else
      (void)pinned;
      cuda_not_built("allocate");
#endif
    }
    if (p) ++system_allocations;
    return p;
  }

  void system_free(Block& b) {
    if (!b.ptr) return;
    if (backend == Backend::cpu) {
      std::free(b.ptr);
    } else {
#if MOEBENCH_WITH_CUDA
      if (b.pinned) cudaFreeHost(b.ptr); else cudaFree(b.ptr);  // at exit the runtime may be gone: nothing to report
#endif
    }
    b.ptr = nullptr;
  }

  // 0xFF bytes over the block, in the order of `s`.
  void fill_poison(Block& b, const Stream& s) {
    const PoolPoisoning poisoning;  // no op of the computation: the kernel log leaves it out
    if (backend == Backend::cpu) {
      run_on(s, "poison", [p = b.ptr, n = b.size] { std::memset(p, 0xFF, n); });
    } else {
#if MOEBENCH_WITH_CUDA
      if (!b.pinned) cudaMemsetAsync(b.ptr, 0xFF, b.size, static_cast<cudaStream_t>(s.handle));
#endif
    }
  }

  // Deferred blocks whose other streams have finished with them go back to their owner's list.
  void collect_deferred() {
    for (std::size_t i = 0; i < deferred.size();) {
      Block* b = deferred[i];
      bool done = true;
      for (const auto& e : b->pending) done = done && e->query();
      if (!done) { ++i; continue; }
      b->pending.clear();
      free_lists[order_of(b->owner)].emplace(b->size, b);
      deferred[i] = deferred.back();
      deferred.pop_back();
    }
  }

  // The smallest cached block of at least `size` (and not wastefully larger) in `list`.
  static std::multimap<std::size_t, Block*>::iterator best_fit(std::multimap<std::size_t, Block*>& list, std::size_t size,
                                                                bool pinned) {
    for (auto it = list.lower_bound(size); it != list.end() && it->first <= 2 * size + 4096; ++it)
      if (it->second->pinned == pinned) return it;
    return list.end();
  }

  Block* new_block(std::size_t size, bool pinned, const Stream& s) {
    void* p = system_alloc(size, pinned);
    if (!p) return nullptr;
    blocks.push_back(std::make_unique<Block>());
    Block* b = blocks.back().get();
    b->ptr = p;
    b->size = size;
    b->pinned = pinned;
    b->owner = s;
    if (!pinned) reserved += size;
    return b;
  }

  // A block for a stream being captured: one the capture freed (another stream's after waiting
  // for its free, an event of the same capture), or a new one.
  Block* take_for_graph(std::size_t size, bool pinned, const Stream& s) {
    auto& list = graph_free[capturing];
    Block* b = nullptr;
    if (auto it = best_fit(list, size, pinned); it != list.end()) {
      b = it->second;
      list.erase(it);
      if (!same_order(b->owner, s)) b->freed->make_wait(s);
      b->owner = s;
    } else if ((b = new_block(size, pinned, s))) {
      b->graph = capturing;
    }
    return b;
  }

  Block* take(std::size_t size, bool pinned, const Stream& s) {
    const bool graph_stream = s.capturing();
    if (capturing && graph_stream) return take_for_graph(size, pinned, s);
    if (graph_stream)
      throw Error("allocation on a stream being captured into a graph, with no capture open in this allocator "
                  "(TrackingAllocator::begin_capture)");
    if (!capturing) collect_deferred();  // a capture's events cannot be queried
    auto& mine = free_lists[order_of(s)];
    if (auto it = best_fit(mine, size, pinned); it != mine.end()) {  // stream order makes it safe at once
      Block* b = it->second;
      mine.erase(it);
      return b;
    }
    for (auto& [order, list] : free_lists) {  // another stream's: wait for what it did with it
      if (order == order_of(s)) continue;
      auto it = best_fit(list, size, pinned);
      if (it == list.end() || !it->second->freed) continue;
      Block* b = it->second;
      list.erase(it);
      b->freed->make_wait(s);
      b->owner = s;
      return b;
    }
    return new_block(size, pinned, s);
  }

  void give_back(Block* b, std::size_t bytes, MemTag tag) {
    std::lock_guard<std::mutex> lock(mutex);
    if (b->pinned) {
      pinned_current -= bytes;
    } else {
      current[static_cast<int>(tag)] -= bytes;
      current_total -= bytes;
    }
    b->in_use = false;
    for (const Stream& s : b->also_used_on) {
      b->pending.push_back(std::make_unique<Event>(s.backend));
      b->pending.back()->record(s);
    }
    b->also_used_on.clear();
    if (b->graph || (capturing && b->owner.capturing())) return keep_for_graph(b);
    if (poison) {  // after every stream that used it is done with it
      if (can_mark(b->owner))
        for (const auto& e : b->pending) e->make_wait(b->owner);
      fill_poison(*b, b->owner);
    }
    if (can_mark(b->owner)) {
      if (!b->freed) b->freed = std::make_unique<Event>(b->owner.backend);
      b->freed->record(b->owner);
    }
    if (b->pending.empty())
      free_lists[order_of(b->owner)].emplace(b->size, b);
    else
      deferred.push_back(b);
  }

  // A graph's block goes back to its pool, reusable at once in its owner's order: a capture's
  // events cannot be queried later, so the owner waits for the other streams' use now.
  void keep_for_graph(Block* b) {
    if (!b->graph) b->graph = capturing;
    for (const auto& e : b->pending) e->make_wait(b->owner);
    b->pending.clear();
    if (poison) fill_poison(*b, b->owner);
    if (!b->freed) b->freed = std::make_unique<Event>(b->owner.backend);
    b->freed->record(b->owner);
    graph_free[b->graph].emplace(b->size, b);
  }

  // Graph `id`'s blocks return to the pool (its replays have completed): free ones to their
  // owners' lists with a free event recorded outside the capture, ones in use when released.
  void release_graph(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex);
    if (capturing == id) capturing = 0;
    for (auto& [size, b] : graph_free[id]) {
      b->freed = std::make_unique<Event>(b->owner.backend);
      b->freed->record(b->owner);
      free_lists[order_of(b->owner)].emplace(size, b);
    }
    graph_free.erase(id);
    for (auto& b : blocks)
      if (b->graph == id) b->graph = 0;
  }

  // Every cached block back to the system once its last use is done (the mutex held); returns
  // how many. An allocation the system refuses retries after this, as a caching allocator does.
  std::size_t release_cached() {
    std::size_t n = 0;
#if MOEBENCH_WITH_CUDA
    // cudaFree waits for the whole device, whose other streams may hold kernels waiting on a
    // stopped peer: the device is drained first, under the deadline.
    bool any = false;
    for (auto& [id, list] : free_lists) any = any || !list.empty();
    if (backend == Backend::cuda && any && !capturing) {  // a capture may not synchronize
      Watchdog::Scope watch("cached device memory returned to CUDA (cudaFree waits for the whole device)");
      MOEBENCH_CUDA_CHECK(cudaDeviceSynchronize());
    }
#endif
    for (auto& [id, list] : free_lists) {
      for (auto& [size, b] : list) {
        if (b->freed) b->freed->synchronize();
        if (!b->pinned) reserved -= b->size;
        system_free(*b);
        ++n;
      }
      list.clear();
    }
    std::vector<std::unique_ptr<Block>> kept;
    for (auto& b : blocks)
      if (b->ptr) kept.push_back(std::move(b));
    blocks = std::move(kept);
    return n;
  }

  static Buffer hand_out(const std::shared_ptr<Pool>& pool, std::size_t bytes, MemTag tag, const Stream& s, bool pinned);
};

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_; bytes_ = o.bytes_; tag_ = o.tag_; block_ = o.block_; pool_ = std::move(o.pool_);
    o.data_ = nullptr; o.bytes_ = 0; o.block_ = nullptr; o.pool_.reset();
  }
  return *this;
}

void Buffer::record_stream(const Stream& s) {
  if (!block_ || same_order(s, block_->owner)) return;
  std::lock_guard<std::mutex> lock(pool_->mutex);
  for (const Stream& t : block_->also_used_on)
    if (same_order(t, s)) return;
  block_->also_used_on.push_back(s);
}

void Buffer::release() {
  if (pool_ && block_) pool_->give_back(block_, bytes_, tag_);
  data_ = nullptr;
  bytes_ = 0;
  block_ = nullptr;
  pool_.reset();
}

TrackingAllocator::TrackingAllocator(Backend backend, Stream default_stream) : pool_(std::make_shared<Pool>()) {
  if (backend == Backend::cuda && !default_stream.handle)
    throw Error("TrackingAllocator: on cuda its default stream must be one of the device's streams "
                "(Device::default_stream()); the legacy stream is not ordered with them");
  pool_->backend = backend;
  default_stream.backend = backend;
  pool_->default_stream = default_stream;
  const char* poison = std::getenv("MOEBENCH_POOL_POISON");
  pool_->poison = poison && std::strcmp(poison, "1") == 0;
#if MOEBENCH_WITH_CUDA
  if (backend == Backend::cuda) {
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) pool_->baseline_used = total_b - free_b;
  }
#endif
}

TrackingAllocator::~TrackingAllocator() = default;

Buffer Pool::hand_out(const std::shared_ptr<Pool>& pool, std::size_t bytes, MemTag tag, const Stream& s, bool pinned) {
  Pool& p = *pool;
  Buffer b;
  const std::size_t rounded = pool_block_size(bytes);
  if (rounded == 0) return b;
  std::lock_guard<std::mutex> lock(p.mutex);
  ++p.allocations;
  Block* block = p.take(rounded, pinned, s);
  if (!block && !p.capturing && p.release_cached() > 0) block = p.take(rounded, pinned, s);  // the cache's memory first
  if (!block) {
    std::string where = pinned ? "pinned host" : p.backend == Backend::cpu ? "host" : "GPU";
#if MOEBENCH_WITH_CUDA
    if (p.backend == Backend::cuda && !pinned) {
      std::size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      where += " (" + format_bytes(double(free_b)) + " free of " + format_bytes(double(total_b)) + ")";
    }
#endif
    throw Error("out of " + where + " memory allocating " + format_bytes(double(bytes)) + " for " + mem_tag_name(tag) + " (" +
                format_bytes(double(p.current_total)) + " already in use, " + format_bytes(double(p.reserved)) +
                " held by the pool)");
  }
  block->in_use = true;
  if (p.poison) p.fill_poison(*block, s);
  b.data_ = block->ptr;
  b.bytes_ = bytes;
  b.tag_ = tag;
  b.block_ = block;
  b.pool_ = pool;
  if (pinned) {
    p.pinned_current += bytes;
    p.pinned_peak = std::max(p.pinned_peak, p.pinned_current);
  } else {
    const int t = static_cast<int>(tag);
    p.current[t] += bytes;
    p.peak[t] = std::max(p.peak[t], p.current[t]);
    p.current_total += bytes;
    p.peak_total = std::max(p.peak_total, p.current_total);
  }
  return b;
}

Buffer TrackingAllocator::allocate(std::size_t bytes, MemTag tag) {
  return Pool::hand_out(pool_, bytes, tag, pool_->default_stream, false);
}
Buffer TrackingAllocator::allocate(std::size_t bytes, MemTag tag, const Stream& s) {
  return Pool::hand_out(pool_, bytes, tag, s, false);
}
Buffer TrackingAllocator::allocate_pinned(std::size_t bytes, MemTag tag, const Stream& s) {
  return Pool::hand_out(pool_, bytes, tag, s, true);
}

void TrackingAllocator::reserve(Buffer& b, std::size_t bytes, MemTag tag) { reserve(b, bytes, tag, pool_->default_stream); }

void TrackingAllocator::reserve(Buffer& b, std::size_t bytes, MemTag tag, const Stream& s) {
  if (b && b.bytes() >= bytes) return;
  b.release();
  b = allocate(bytes, tag, s);
}

Backend TrackingAllocator::backend() const { return pool_->backend; }
std::size_t TrackingAllocator::current(MemTag t) const { return pool_->current[static_cast<int>(t)]; }
std::size_t TrackingAllocator::peak(MemTag t) const { return pool_->peak[static_cast<int>(t)]; }
std::size_t TrackingAllocator::current_total() const { return pool_->current_total; }
std::size_t TrackingAllocator::peak_total() const { return pool_->peak_total; }
std::int64_t TrackingAllocator::allocations() const { return pool_->allocations; }
std::int64_t TrackingAllocator::system_allocations() const { return pool_->system_allocations; }
std::size_t TrackingAllocator::reserved_bytes() const { return pool_->reserved; }
std::size_t TrackingAllocator::pinned_current() const { return pool_->pinned_current; }
std::size_t TrackingAllocator::pinned_peak() const { return pool_->pinned_peak; }

void TrackingAllocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  pool_->peak = pool_->current;
  pool_->peak_total = pool_->current_total;
  pool_->pinned_peak = pool_->pinned_current;
}

void TrackingAllocator::trim() {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  pool_->release_cached();
}

void TrackingAllocator::set_poison(bool on) { pool_->poison = on; }

GraphPool TrackingAllocator::begin_capture() {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  if (pool_->capturing) throw Error("TrackingAllocator: a graph capture begins while another is open");
  GraphPool g;
  g.pool_ = pool_;
  g.id_ = pool_->capturing = pool_->next_graph++;
  return g;
}

void TrackingAllocator::end_capture() {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  pool_->capturing = 0;
}

GraphPool& GraphPool::operator=(GraphPool&& o) noexcept {
  if (this != &o) {
    release();
    pool_ = std::move(o.pool_);
    id_ = o.id_;
    o.id_ = 0;
  }
  return *this;
}

void GraphPool::release() {
  if (pool_ && id_) pool_->release_graph(id_);
  pool_.reset();
  id_ = 0;
}

std::size_t GraphPool::reserved_bytes() const {
  if (!pool_) return 0;
  std::lock_guard<std::mutex> lock(pool_->mutex);
  std::size_t n = 0;
  for (const auto& b : pool_->blocks)
    if (b->graph == id_ && !b->pinned) n += b->size;
  return n;
}

std::optional<std::int64_t> TrackingAllocator::device_used_delta() const {
#if MOEBENCH_WITH_CUDA
  if (pool_->backend == Backend::cuda) {
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return std::nullopt;
    return static_cast<std::int64_t>(total_b - free_b) - static_cast<std::int64_t>(pool_->baseline_used);
  }
#endif
  return std::nullopt;
}

}  // namespace moebench
