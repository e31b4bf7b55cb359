// The device, common to both backends: opening, streams, exec and copies, each handed to the
// backend's side (device_cpu.cpp, device_cuda.cpp).
#include "runtime/device.h"
#include <atomic>
#include <cstring>
#include <vector>
#include "runtime/cpu_queue.h"
#include "runtime/inline_queue.h"
#include "runtime/op_hooks.h"
#include "runtime/timeline.h"

namespace moebench {
namespace detail {
void cuda_event_synchronize(void* event);  // runtime/stream_cuda.cpp: polled, under the deadline
}

Device Device::open(Backend backend, int local_rank) {
  Device d;
  d.backend_ = backend;
  d.default_stream_.backend = backend;
  if (backend == Backend::cpu)
    d.open_cpu();
  else
    d.open_cuda(local_rank);
  Timeline::name_track(0, "default stream");
  return d;
}

Device::Device(Device&&) noexcept = default;
Device& Device::operator=(Device&&) noexcept = default;
Device::~Device() = default;

void Device::memory(std::size_t* free_bytes, std::size_t* total_bytes) const {
  if (backend_ == Backend::cuda) return cuda_memory(free_bytes, total_bytes);
  detail::host_memory(free_bytes, total_bytes);
}

Stream Device::create_stream(const std::string& name) {
  // Unique in the process, not per device: the pool keys its free lists by stream id and the
  // timeline its tracks, and a process may open several devices (tests do).
  static std::atomic<int> next_stream_id{1};
  const int id = next_stream_id++;
  Timeline::name_track(id, name);
  if (backend_ == Backend::cuda) return create_cuda_stream(id);
  cpu_queues_.push_back(std::make_unique<CpuQueue>(name, id));
  Stream s;
  s.backend = Backend::cpu;
  s.queue = cpu_queues_.back().get();
  s.id = id;
  return s;
}

Exec Device::exec(const Stream& s) const {
  Exec e;
  e.backend = backend_;
  e.stream = s.handle;
  // Each CUDA stream's cuBLAS handle is bound to it once, at creation; the GEMMs do not rebind it.
  if (backend_ == Backend::cuda && !s.blas)
    throw Error("Device::exec: a CUDA stream this device did not create (it has no cuBLAS handle of its own)");
  e.blas = s.blas;
  e.blas_lt = s.blas_lt;
  e.workspace = s.blas_workspace;
  e.workspace_bytes = s.blas_workspace_bytes;
  e.tensor_cores = tensor_cores_;
  if (backend_ == Backend::cpu) e.queue = s.queue ? static_cast<HostQueue*>(s.queue) : &inline_queue();
  e.trials_allowed = &op_hooks::trials_allowed;
  if (backend_ == Backend::cuda) e.wait_event = &detail::cuda_event_synchronize;
  return e;
}

void Device::synchronize() const {
  if (backend_ == Backend::cuda) return cuda_synchronize();
  for (const auto& q : cpu_queues_) q->synchronize();
}

// A copy's bytes in the timeline (how much an offload or a restore moved).
static std::string copy_details(std::size_t bytes, const Stream& s) {
  return s.queue && s.queue->recording() ? "\"bytes\": " + std::to_string(bytes) : std::string();
}

void Device::copy_to_device(void* dst, const void* src, std::size_t bytes, const Stream& s) const {
  if (backend_ == Backend::cuda) return cuda_copy(dst, src, bytes, 0, s);
  if (!bytes) return;
  if (!s.queue) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // The caller may reuse `src` at once: the queued copy takes its own.
  auto data = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
  run_on(s, "copy to device", [dst, data] { std::memcpy(dst, data->data(), data->size()); }, copy_details(bytes, s));
}

void Device::copy_to_host(void* dst, const void* src, std::size_t bytes, const Stream& s) const {
  if (backend_ == Backend::cuda) return cuda_copy(dst, src, bytes, 1, s);
  if (!bytes) return;
  // As on CUDA (device_cuda.cpp), whose copy into pageable memory waits for the stream where no
  // deadline reaches: the stream is drained under the deadline first, then the copy's own wait
  // has none.
  s.synchronize();
  run_on(s, "copy to host", [=] { std::memcpy(dst, src, bytes); }, copy_details(bytes, s));
  if (s.queue) s.queue->synchronize_without_deadline();
}

void Device::copy_to_pinned_host(void* dst, const void* src, std::size_t bytes, const Stream& s) const {
  if (backend_ == Backend::cuda) return cuda_copy(dst, src, bytes, 3, s);
  if (!bytes) return;
  run_on(s, "copy to host", [=] { std::memcpy(dst, src, bytes); }, copy_details(bytes, s));
}

void Device::copy(void* dst, const void* src, std::size_t bytes, const Stream& s) const {
  if (backend_ == Backend::cuda) return cuda_copy(dst, src, bytes, 2, s);
  if (!bytes) return;
  run_on(s, "copy", [=] { std::memmove(dst, src, bytes); }, copy_details(bytes, s));
}

void Device::fill_zero(void* dst, std::size_t bytes, const Stream& s) const {
  if (backend_ == Backend::cuda) return cuda_fill_zero(dst, bytes, s);
  if (!bytes) return;
  run_on(s, "fill zero", [=] { std::memset(dst, 0, bytes); });
}

}  // namespace moebench
