// The multi-rank suites' backend, from MOEBENCH_TEST_BACKEND: cpu (the default) or cuda. On cuda
// the world communicator is NCCL's on the GPU of this rank's local index, and what a case
// exchanges lives on the device: DeviceMirror gives each host vector a device copy and brings
// every copy back at sync(). Suites written for either backend are listed in
// tests/mpi/mpi_test_main.cpp; on cuda the others are left out, and it says so.
#pragma once
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>
#include "runtime/allocator.h"
#include "runtime/comm.h"
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

inline Device open_device() { return Device::open(backend(), Runtime::current() ? Runtime::current()->local_rank() : 0); }

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

}  // namespace moebench::test_backend
