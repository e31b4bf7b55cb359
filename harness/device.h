// A device (cpu or cuda) with streams and events. On the CPU a stream runs each op to
// completion when it is called, so an event records the host clock; on CUDA streams and
// events are the runtime's own. Every op reaches the kernels through Device::exec(stream).
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "kernels/exec.h"

namespace moebench {

struct Stream {
  Backend backend = Backend::cpu;
  void* handle = nullptr;  // cudaStream_t; nullptr is the legacy default stream
  void synchronize() const;
};

class Event {
 public:
  explicit Event(Backend backend);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& s);
  void synchronize() const;
  // Milliseconds from `start` to `stop`; both recorded, `stop` complete.
  static double elapsed_ms(const Event& start, const Event& stop);
  // Makes work later queued on `s` wait for this event (stream-to-stream ordering).
  void make_wait(const Stream& s) const;

 private:
  Backend backend_;
  void* handle_ = nullptr;  // cudaEvent_t
  std::chrono::steady_clock::time_point host_time_{};
};

struct DeviceInfo {
  std::string name;     // GPU or CPU model
  std::string driver;   // NVIDIA driver version, or "-" on the CPU
  std::string cuda;     // CUDA runtime version used, or "-"
  std::size_t total_bytes = 0, free_bytes = 0;
};

class Device {
 public:
  // cuda: the GPU with index local_rank % device count. Throws Error if none is usable.
  static Device open(Backend backend, int local_rank = 0);
  // Number of CUDA devices, 0 with no GPU, no driver or a build without CUDA; `why` says why 0.
  static int cuda_device_count(std::string* why = nullptr);

  Device(Device&&) noexcept;
  Device& operator=(Device&&) noexcept;
  ~Device();

  Backend backend() const { return backend_; }
  int ordinal() const { return ordinal_; }
  const DeviceInfo& info() const { return info_; }
  // Free and total memory now (cudaMemGetInfo; on the CPU, available and total RAM).
  void memory(std::size_t* free_bytes, std::size_t* total_bytes) const;

  Stream& default_stream() { return default_stream_; }
  Stream create_stream();  // owned by the device
  Exec exec(const Stream& s) const;
  void set_tensor_cores(bool on) { tensor_cores_ = on; }
  bool tensor_cores() const { return tensor_cores_; }
  void synchronize() const;

  // Copies between host memory and this device's memory (plain copies on the CPU).
  void copy_to_device(void* dst, const void* src, std::size_t bytes, const Stream& s) const;
  void copy_to_host(void* dst, const void* src, std::size_t bytes, const Stream& s) const;
  void copy(void* dst, const void* src, std::size_t bytes, const Stream& s) const;
  void fill_zero(void* dst, std::size_t bytes, const Stream& s) const;

 private:
  Device() = default;
  Backend backend_ = Backend::cpu;
  int ordinal_ = 0;
  DeviceInfo info_;
  Stream default_stream_;
  std::vector<void*> owned_streams_;
  void* blas_ = nullptr;  // cublasHandle_t
  bool tensor_cores_ = true;
};

// Brackets only the measured iterations for `nsys profile --capture-range=cudaProfilerApi`.
void profiler_start(Backend b);
void profiler_stop(Backend b);

}  // namespace moebench
