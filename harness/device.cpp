#include "harness/device.h"
#include <cstring>
#include <fstream>
#include <unistd.h>
#if MOEBENCH_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include "kernels/cuda_check.cuh"
#endif

namespace moebench {

namespace {
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "cpu";
}

void host_memory(std::size_t* free_bytes, std::size_t* total_bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  *free_bytes = static_cast<std::size_t>(sysconf(_SC_AVPHYS_PAGES)) * page;
  *total_bytes = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page;
  // MemAvailable counts reclaimable page cache, which sysconf's free pages do not.
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::size_t kb;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") { *free_bytes = kb * 1024; break; }
  }
}

#if MOEBENCH_WITH_CUDA
std::string nvidia_driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(in, line)) {
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ..."
    auto pos = line.find("Kernel Module");
    if (pos != std::string::npos) {
      std::string rest = line.substr(pos + 13);
      auto b = rest.find_first_not_of(' ');
      auto e = rest.find(' ', b);
      if (b != std::string::npos) return rest.substr(b, e - b);
    }
  }
  int v = 0;
  cudaDriverGetVersion(&v);
  return "cuda-driver-api-" + std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
#endif
}  // namespace

void Stream::synchronize() const {
#if MOEBENCH_WITH_CUDA
  if (backend == Backend::cuda) MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle)));
#endif
}

Event::Event(Backend backend) : backend_(backend) {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) {
    cudaEvent_t e;
    MOEBENCH_CUDA_CHECK(cudaEventCreate(&e));
    handle_ = e;
  }
#else
  if (backend_ == Backend::cuda) cuda_not_built("Event");
#endif
}

Event::~Event() {
#if MOEBENCH_WITH_CUDA
  if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
#endif
}

Event::Event(Event&& o) noexcept : backend_(o.backend_), handle_(o.handle_), host_time_(o.host_time_) { o.handle_ = nullptr; }

Event& Event::operator=(Event&& o) noexcept {
  std::swap(backend_, o.backend_);
  std::swap(handle_, o.handle_);
  std::swap(host_time_, o.host_time_);
  return *this;
}

void Event::record(const Stream& s) {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) {
    MOEBENCH_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(s.handle)));
    return;
  }
#endif
  (void)s;
  host_time_ = std::chrono::steady_clock::now();
}

void Event::synchronize() const {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) MOEBENCH_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)));
#endif
}

void Event::make_wait(const Stream& s) const {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda)
    MOEBENCH_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s.handle), static_cast<cudaEvent_t>(handle_), 0));
#endif
  (void)s;  // CPU streams complete each op when it is called
}

double Event::elapsed_ms(const Event& start, const Event& stop) {
#if MOEBENCH_WITH_CUDA
  if (start.backend_ == Backend::cuda) {
    stop.synchronize();
    float ms = 0.f;
    MOEBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle_), static_cast<cudaEvent_t>(stop.handle_)));
    return ms;
  }
#endif
  return std::chrono::duration<double, std::milli>(stop.host_time_ - start.host_time_).count();
}

int Device::cuda_device_count(std::string* why) {
#if MOEBENCH_WITH_CUDA
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are not confused
    if (why) *why = cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device found";
  return n;
#else
  if (why) *why = "this build has no CUDA backend";
  return 0;
#endif
}

Device Device::open(Backend backend, int local_rank) {
  Device d;
  d.backend_ = backend;
  d.default_stream_.backend = backend;
  if (backend == Backend::cpu) {
    d.info_.name = cpu_model();
    d.info_.driver = "-";
    d.info_.cuda = "-";
    host_memory(&d.info_.free_bytes, &d.info_.total_bytes);
    return d;
  }
#if MOEBENCH_WITH_CUDA
  std::string why;
  const int count = cuda_device_count(&why);
  if (count == 0) throw Error("--backend cuda: no usable GPU (" + why + "); use --backend cpu");
  d.ordinal_ = local_rank % count;
  MOEBENCH_CUDA_CHECK(cudaSetDevice(d.ordinal_));
  cudaDeviceProp prop;
  MOEBENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, d.ordinal_));
  d.info_.name = prop.name;
  d.info_.driver = nvidia_driver_version();
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  d.info_.cuda = std::to_string(rt / 1000) + "." + std::to_string((rt % 1000) / 10);
  MOEBENCH_CUDA_CHECK(cudaMemGetInfo(&d.info_.free_bytes, &d.info_.total_bytes));
  cudaStream_t s;
  MOEBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  d.owned_streams_.push_back(s);
  d.default_stream_.handle = s;
  cublasHandle_t h;
  MOEBENCH_CUBLAS_CHECK(cublasCreate(&h));
  d.blas_ = h;
  return d;
#else
  (void)local_rank;
  cuda_not_built("--backend cuda");
#endif
}

Device::Device(Device&& o) noexcept { *this = std::move(o); }

Device& Device::operator=(Device&& o) noexcept {
  std::swap(backend_, o.backend_);
  std::swap(ordinal_, o.ordinal_);
  std::swap(info_, o.info_);
  std::swap(default_stream_, o.default_stream_);
  std::swap(owned_streams_, o.owned_streams_);
  std::swap(blas_, o.blas_);
  std::swap(tensor_cores_, o.tensor_cores_);
  return *this;
}

Device::~Device() {
#if MOEBENCH_WITH_CUDA
  if (blas_) cublasDestroy(static_cast<cublasHandle_t>(blas_));
  for (void* s : owned_streams_) cudaStreamDestroy(static_cast<cudaStream_t>(s));
#endif
}

void Device::memory(std::size_t* free_bytes, std::size_t* total_bytes) const {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) {
    MOEBENCH_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
    return;
  }
#endif
  host_memory(free_bytes, total_bytes);
}

Stream Device::create_stream() {
  Stream s;
  s.backend = backend_;
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) {
    cudaStream_t h;
    MOEBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking));
    owned_streams_.push_back(h);
    s.handle = h;
  }
#endif
  return s;
}

Exec Device::exec(const Stream& s) const {
  Exec e;
  e.backend = backend_;
  e.stream = s.handle;
  e.blas = blas_;
  e.tensor_cores = tensor_cores_;
  return e;
}

void Device::synchronize() const {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) MOEBENCH_CUDA_CHECK(cudaDeviceSynchronize());
#endif
}

void Device::copy_to_device(void* dst, const void* src, std::size_t bytes, const Stream& s) const {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) {
    MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(s.handle)));
    return;
  }
#endif
  (void)s;
  if (bytes) std::memcpy(dst, src, bytes);
}

void Device::copy_to_host(void* dst, const void* src, std::size_t bytes, const Stream& s) const {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) {
    MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(s.handle)));
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(s.handle)));
    return;
  }
#endif
  (void)s;
  if (bytes) std::memcpy(dst, src, bytes);
}

void Device::copy(void* dst, const void* src, std::size_t bytes, const Stream& s) const {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) {
    MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(s.handle)));
    return;
  }
#endif
  (void)s;
  if (bytes) std::memmove(dst, src, bytes);
}

void Device::fill_zero(void* dst, std::size_t bytes, const Stream& s) const {
#if MOEBENCH_WITH_CUDA
  if (backend_ == Backend::cuda) {
    MOEBENCH_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(s.handle)));
    return;
  }
#endif
  (void)s;
  if (bytes) std::memset(dst, 0, bytes);
}

void profiler_start(Backend b) {
#if MOEBENCH_WITH_CUDA
  if (b == Backend::cuda) MOEBENCH_CUDA_CHECK(cudaProfilerStart());
#endif
  (void)b;
}

void profiler_stop(Backend b) {
#if MOEBENCH_WITH_CUDA
  if (b == Backend::cuda) MOEBENCH_CUDA_CHECK(cudaProfilerStop());
#endif
  (void)b;
}

}  // namespace moebench
