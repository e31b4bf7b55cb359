// A device (cpu or cuda) with its streams. Streams the device creates run concurrently (see
// runtime/stream.h); the device owns them, their CPU worker threads, CUDA streams and cuBLAS
// handles with their workspaces. Every op reaches the kernels through Device::exec(stream).
// The backends live in device_cpu.cpp and device_cuda.cpp.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "kernels/exec.h"
#include "runtime/stream.h"

namespace moebench {

struct DeviceInfo {
  std::string name;     // GPU or CPU model
  std::string driver;   // NVIDIA driver version, or "-" on the CPU
  std::string cuda;     // CUDA runtime version used, or "-"
  std::size_t total_bytes = 0, free_bytes = 0;
};

class CpuQueue;

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
  // A new stream that runs concurrently with the others; owned by the device. `name` labels
  // its timeline track and its errors.
  Stream create_stream(const std::string& name);
  Exec exec(const Stream& s) const;
  void set_tensor_cores(bool on) { tensor_cores_ = on; }
  bool tensor_cores() const { return tensor_cores_; }
  // Waits for every stream of the device.
  void synchronize() const;

  // Copies in the order of `s`. To the device: `src` may be reused when the call returns.
  // To the host: returns when the bytes are there (the host reads them next).
  void copy_to_device(void* dst, const void* src, std::size_t bytes, const Stream& s) const;
  void copy_to_host(void* dst, const void* src, std::size_t bytes, const Stream& s) const;
  // To pinned host memory (TrackingAllocator::allocate_pinned) without waiting: the host reads
  // `dst` once `s` is synchronised. On the timeline it is a "copy to host" like the one above.
  void copy_to_pinned_host(void* dst, const void* src, std::size_t bytes, const Stream& s) const;
  // Device to device, or between the device and pinned host memory, asynchronously.
  void copy(void* dst, const void* src, std::size_t bytes, const Stream& s) const;
  void fill_zero(void* dst, std::size_t bytes, const Stream& s) const;

 private:
  Device() = default;
  // The CUDA side: streams, cuBLAS handles and workspaces (device_cuda.cpp).
  struct Cuda;
  struct CudaDeleter {
    void operator()(Cuda* c) const;
  };
  void open_cpu();                                    // device_cpu.cpp
  void open_cuda(int local_rank);                     // device_cuda.cpp
  Stream create_cuda_stream(int id);
  void cuda_memory(std::size_t* free_bytes, std::size_t* total_bytes) const;
  void cuda_synchronize() const;
  // kind: 0 host->device, 1 device->host (waits), 2 any (cudaMemcpyDefault), 3 device->pinned host
  void cuda_copy(void* dst, const void* src, std::size_t bytes, int kind, const Stream& s) const;
  void cuda_fill_zero(void* dst, std::size_t bytes, const Stream& s) const;

  Backend backend_ = Backend::cpu;
  int ordinal_ = 0;
  DeviceInfo info_;
  Stream default_stream_;
  std::vector<std::unique_ptr<CpuQueue>> cpu_queues_;
  std::unique_ptr<Cuda, CudaDeleter> cuda_;
  bool tensor_cores_ = true;
};

// Brackets only the measured iterations for `nsys profile --capture-range=cudaProfilerApi`.
void profiler_start(Backend b);
void profiler_stop(Backend b);

// Backend parts (device_cpu.cpp, device_cuda.cpp); not for callers.
namespace detail {
std::string cpu_model();
void host_memory(std::size_t* free_bytes, std::size_t* total_bytes);
}  // namespace detail

}  // namespace moebench
