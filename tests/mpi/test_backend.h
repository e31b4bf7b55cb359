// The multi-rank suites' backend, from MOEBENCH_TEST_BACKEND: cpu (the default) or cuda. On cuda
// the world communicator is NCCL's on the GPU of this rank's local index, and what a case
// exchanges lives on the device: DeviceMirror gives each host vector a device copy and brings
// every copy back at sync(). Suites written for either backend are listed in
// tests/mpi/mpi_test_main.cpp; on cuda the others are left out, and it says so.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>
#include <gtest/gtest.h>
#include "kernels/convert.h"
#include "runtime/allocator.h"
#include "comm/comm.h"
#include "runtime/device.h"
#include "runtime/runtime.h"

namespace moebench::test_backend {

inline Backend backend() {
  const char* v = std::getenv("MOEBENCH_TEST_BACKEND");
  const std::string b = v && *v ? v : "cpu";
  if (b != "cpu" && b != "cuda")
    throw Error("MOEBENCH_TEST_BACKEND: '" + b + "' is not a backend; allowed: cpu, cuda");
  return b == "cuda" ? Backend::cuda : Backend::cpu;
}

// This rank's device. On cuda the GEMMs run in plain fp32 (no TF32), as the CPU's do, so that a
// layer's routing (top-k choices, capacity drops) is the same on both and fp32 results compare
// with fp32 tolerances (f32_tolerance).
inline Device open_device() {
  Device dev = Device::open(backend(), Runtime::current() ? Runtime::current()->local_rank() : 0);
  dev.set_tensor_cores(false);
  return dev;
}

// The tolerance of an fp32 comparison that holds `cpu` on the CPU. On cuda, cuBLAS and the
// scatter's atomics sum in other orders than the CPU reference: each of the up to 10^4 rounded
// partial sums of a small layer adds 2^-24, so 1e-4 covers them, and a wrong result is off by far
// more.
inline double f32_tolerance(double cpu) { return backend() == Backend::cpu ? cpu : std::max(cpu, 1e-4); }

// A device buffer of `t` (fp32, fp16 or bf16) read back as fp32 values.
inline std::vector<float> host_floats(Device& dev, const Buffer& b, DType t = DType::f32) {
  const std::size_t n = b.bytes() / dtype_size(t);
  std::vector<float> out(n);
  if (t == DType::f32) {
    dev.copy_to_host(out.data(), b.data(), n * 4, dev.default_stream());
  } else {
    std::vector<std::uint16_t> bits(n);
    dev.copy_to_host(bits.data(), b.data(), n * 2, dev.default_stream());
    for (std::size_t i = 0; i < n; ++i) out[i] = from_bits16(t, bits[i]);
  }
  dev.default_stream().synchronize();
  return out;
}

// Why a case that reads the CPU backend's op timeline skips on cuda.
inline constexpr const char* kReadsCpuTimeline =
    "reads the CPU backend's op timeline (runtime/timeline.h), which CUDA streams do not record";

// MPI's communicator on cpu (as make_mpi_communicator), NCCL's on cuda.
inline std::unique_ptr<Communicator> world() {
  if (!Runtime::current()) throw Error("the multi-rank tests' main makes the Runtime first");
  return make_world_communicator(*Runtime::current(), backend());
}

// Host vectors and their device copies: on the CPU the vectors themselves.
class DeviceMirror {
 public:
  DeviceMirror(Device& dev, const Stream& s) : dev_(dev), s_(s), alloc_(dev.backend()) {}

  // The device copy of `host` (uploaded the first time it is asked for).
  template <class T>
  T* operator()(std::vector<T>& host) {
    if (dev_.backend() == Backend::cpu) return host.data();
    for (Entry& e : entries_)
      if (e.host == host.data()) return static_cast<T*>(e.buffer.data());
    const std::size_t bytes = host.size() * sizeof(T);
    entries_.push_back({host.data(), bytes, alloc_.allocate(bytes ? bytes : 1, MemTag::temporary, s_)});
    dev_.copy_to_device(entries_.back().buffer.data(), host.data(), bytes, s_);
    s_.synchronize();  // so that work on any stream may read it
    return static_cast<T*>(entries_.back().buffer.data());
  }
  // Waits for the stream, then copies every device copy back into its host vector.
  void sync() {
    for (Entry& e : entries_) dev_.copy_to_host(e.host, e.buffer.data(), e.bytes, s_);
    s_.synchronize();
  }

 private:
  struct Entry {
    void* host;
    std::size_t bytes;
    Buffer buffer;
  };
  Device& dev_;
  Stream s_;
  TrackingAllocator alloc_;
  std::vector<Entry> entries_;
};

// The multi-rank suites' fixtures stand on this: the world communicator with this rank's index and
// the world's size. WorldOf::backend: the suite's backend's (world()); WorldOf::mpi: MPI's, for
// the suites that test MPI's communicator itself or stages written as host code.
enum class WorldOf { backend, mpi };

template <WorldOf kWorld>
class WorldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    world = kWorld == WorldOf::backend ? test_backend::world() : make_mpi_communicator();
    r = world->rank();
    n = world->size();
  }
  std::unique_ptr<Communicator> world;
  int r = 0, n = 1;
};

}  // namespace moebench::test_backend
