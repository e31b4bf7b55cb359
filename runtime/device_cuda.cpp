// The device on a GPU: opening it, its streams (each with its own cuBLAS handle and
// workspace: a handle shared by two streams through cublasSetStream races), memory and
// asynchronous copies. Without CUDA, every entry says so.
#include <cctype>
#include <fstream>
#include <sstream>
#include "runtime/device.h"
#if MOEBENCH_WITH_CUDA
#include "kernels/cublas_library.h"
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include "kernels/cublas_check.h"
#include "kernels/cuda_check.cuh"
#include "runtime/cuda_stream.h"
#include "runtime/watchdog.h"
#endif

namespace moebench {
namespace detail {
void cuda_stream_synchronize(void* stream);  // runtime/stream_cuda.cpp
}

#if MOEBENCH_WITH_CUDA

// cuBLAS's recommended workspace on Hopper; ample for the GEMMs here on older GPUs too.
constexpr std::size_t kBlasWorkspaceBytes = 32u << 20;

struct Device::Cuda {
  struct StreamResources {
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    cublasLtHandle_t blas_lt = nullptr;
    void* workspace = nullptr;
    // What the stream's Stream carries.
    void fill(Stream& s) const {
      s.handle = stream;
      s.blas = blas;
      s.blas_lt = blas_lt;
      s.blas_workspace = workspace;
      s.blas_workspace_bytes = kBlasWorkspaceBytes;
    }
  };
  std::vector<StreamResources> streams;  // [0] is the default stream's

  StreamResources make() {
    StreamResources r;
    MOEBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    MOEBENCH_CUBLAS_CHECK(cublas().create(&r.blas));
    MOEBENCH_CUBLAS_CHECK(cublas().set_stream(r.blas, r.stream));
    MOEBENCH_CUDA_CHECK(cudaMalloc(&r.workspace, kBlasWorkspaceBytes));
    MOEBENCH_CUBLAS_CHECK(cublas().set_workspace(r.blas, r.workspace, kBlasWorkspaceBytes));
    MOEBENCH_CUBLAS_CHECK(cublas().lt_create(&r.blas_lt));
    streams.push_back(r);
    return r;
  }
  ~Cuda() {
    for (auto& r : streams) {
      if (r.blas_lt) cublas().lt_destroy(r.blas_lt);
      if (r.blas) cublas().destroy(r.blas);
      if (r.workspace) cudaFree(r.workspace);
      if (r.stream) cudaStreamDestroy(r.stream);
    }
  }
};

void Device::CudaDeleter::operator()(Cuda* c) const { delete c; }

namespace {
std::string nvidia_driver_version() {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ..." or, for the open module,
  // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  ...": the first word
  // made of digits and dots only, with a dot in it.
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line, word;
  std::getline(in, line);
  std::istringstream words(line);
  while (words >> word) {
    if (word.find('.') != std::string::npos && word.find_first_not_of("0123456789.") == std::string::npos &&
        std::isdigit(static_cast<unsigned char>(word.front())))
      return word;
  }
  int v = 0;
  cudaDriverGetVersion(&v);
  return "cuda-driver-api-" + std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
}  // namespace

int Device::cuda_device_count(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it so later calls are not confused
    if (why) *why = cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device found";
  return n;
}

void Device::open_cuda(int local_rank) {
  std::string why;
  const int count = cuda_device_count(&why);
  if (count == 0) throw Error("--backend cuda: no usable GPU (" + why + "); use --backend cpu");
  ordinal_ = local_rank % count;
  MOEBENCH_CUDA_CHECK(cudaSetDevice(ordinal_));
  cudaDeviceProp prop;
  MOEBENCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal_));
  info_.name = prop.name;
  info_.driver = nvidia_driver_version();
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  info_.cuda = std::to_string(rt / 1000) + "." + std::to_string((rt % 1000) / 10);
  MOEBENCH_CUDA_CHECK(cudaMemGetInfo(&info_.free_bytes, &info_.total_bytes));
  cuda_.reset(new Cuda);
  cuda_->make().fill(default_stream_);
}

Stream Device::create_cuda_stream(int id) {
  Stream s;
  s.backend = Backend::cuda;
  cuda_->make().fill(s);
  s.id = id;
  return s;
}


void Device::cuda_memory(std::size_t* free_bytes, std::size_t* total_bytes) const {
  MOEBENCH_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

// The device's streams may hold NCCL's kernels: each is drained first by the polled wait, which
// reads the communicators' errors and has the watchdog's deadline (a stopped peer or a failed
// connection ends it); then cudaDeviceSynchronize, under the deadline, for what other streams hold.
void Device::cuda_synchronize() const {
  for (const auto& r : cuda_->streams) detail::cuda_stream_synchronize(r.stream);
  Watchdog::Scope watch("device synchronize (cuda)");
  MOEBENCH_CUDA_CHECK(cudaDeviceSynchronize());
}

// Host memory CUDA does not know of (neither pinned nor managed): a copy into it is synchronous.
static bool pageable_host(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return a.type == cudaMemoryTypeUnregistered;
}

void Device::cuda_copy(void* dst, const void* src, std::size_t bytes, int kind, const Stream& s) const {
  if (!bytes) return;
  const cudaMemcpyKind k = kind == 0   ? cudaMemcpyHostToDevice
                           : kind == 2 ? cudaMemcpyDefault
                                       : cudaMemcpyDeviceToHost;
  // A copy into pageable host memory returns only once the stream has drained, outside any
  // deadline (a kernel there may wait for a stopped peer): the stream is drained first under the
  // deadline of runtime/peer_wait.h, so the copy itself waits for nothing but its bytes.
  if (kind == 1 || (kind == 2 && pageable_host(dst))) detail::cuda_stream_synchronize(s.handle);
  MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, cuda_stream(s)));
  if (kind == 1) detail::cuda_stream_synchronize(s.handle);
}

void Device::cuda_fill_zero(void* dst, std::size_t bytes, const Stream& s) const {
  if (bytes) MOEBENCH_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, cuda_stream(s)));
}

void profiler_start(Backend b) {
  if (b == Backend::cuda) MOEBENCH_CUDA_CHECK(cudaProfilerStart());
}

void profiler_stop(Backend b) {
  if (b == Backend::cuda) MOEBENCH_CUDA_CHECK(cudaProfilerStop());
}

#else  // no CUDA in this build

struct Device::Cuda {};
void Device::CudaDeleter::operator()(Cuda* c) const { delete c; }

int Device::cuda_device_count(std::string* why) {
  if (why) *why = "this build has no CUDA backend";
  return 0;
}
void Device::open_cuda(int) { cuda_not_built("--backend cuda"); }
Stream Device::create_cuda_stream(int) { cuda_not_built("stream"); }
void Device::cuda_memory(std::size_t*, std::size_t*) const { cuda_not_built("memory"); }
void Device::cuda_synchronize() const {}
void Device::cuda_copy(void*, const void*, std::size_t, int, const Stream&) const { cuda_not_built("copy"); }
void Device::cuda_fill_zero(void*, std::size_t, const Stream&) const { cuda_not_built("fill_zero"); }
void profiler_start(Backend) {}
void profiler_stop(Backend) {}

#endif

}  // namespace moebench
