// Helpers for comparing a CUDA op to its CPU reference: random fp32 data rounded to the
// tested dtype, upload/convert, download/convert, and the relative L2 error.
#pragma once
#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <optional>
#include <random>
#include <vector>
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "kernels/convert.h"

namespace moebench::gputest {

// The device the GPU tests run on: CUDA's; or, with MOEBENCH_GPU_TESTS_ON_CPU=1, the CPU, which
// runs a test's own logic (its references, layouts and bounds) against the CPU kernels, so that a
// test written without a GPU is checked before a GPU's scarce time runs it (CTest
// gpu.tests_on_cpu, for the tests that take either backend).
inline bool gpu_tests_on_cpu() {
  const char* v = std::getenv("MOEBENCH_GPU_TESTS_ON_CPU");
  return v && std::string(v) == "1";
}

// The device, or a skip with the reason when there is no GPU.
#define MOEBENCH_REQUIRE_GPU(dev)                                                   \
  std::string why_no_gpu_;                                                          \
  if (!gputest::gpu_tests_on_cpu() && Device::cuda_device_count(&why_no_gpu_) == 0) \
    GTEST_SKIP() << "no GPU: " << why_no_gpu_;                                      \
  Device dev = gputest::gpu_tests_on_cpu() ? Device::open(Backend::cpu) : Device::open(Backend::cuda, 0)

inline std::vector<float> random_rounded(std::size_t n, DType t, unsigned seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = round_to(t, d(rng));
  return v;
}

// A device buffer holding `host` as it is (indices, counts, fp32 values), and back.
template <class T>
Buffer to_device(Device& dev, TrackingAllocator& alloc, const std::vector<T>& host) {
  Buffer b = alloc.allocate(std::max<std::size_t>(host.size(), 1) * sizeof(T), MemTag::temporary);
  dev.copy_to_device(b.data(), host.data(), host.size() * sizeof(T), dev.default_stream());
  return b;
}
template <class T>
std::vector<T> to_host(Device& dev, const Buffer& b, std::size_t n) {
  std::vector<T> h(n);
  dev.copy_to_host(h.data(), b.data(), n * sizeof(T), dev.default_stream());
  return h;
}

// A device buffer of `t` holding `host`.
inline Buffer upload(Device& dev, TrackingAllocator& alloc, const std::vector<float>& host, DType t) {
  Buffer staging = alloc.allocate(host.size() * 4, MemTag::temporary);
  Buffer out = alloc.allocate(host.size() * dtype_size(t), MemTag::activations);
  dev.copy_to_device(staging.data(), host.data(), host.size() * 4, dev.default_stream());
  convert(dev.exec(dev.default_stream()), staging.data(), DType::f32, out.data(), t, host.size());  // either backend
  dev.default_stream().synchronize();
  return out;
}

inline std::vector<float> download(Device& dev, TrackingAllocator& alloc, const Buffer& b, std::size_t n, DType t) {
  Buffer staging = alloc.allocate(n * 4, MemTag::temporary);
  convert(dev.exec(dev.default_stream()), b.data(), t, staging.data(), DType::f32, n);  // either backend
  std::vector<float> host(n);
  dev.copy_to_host(host.data(), staging.data(), n * 4, dev.default_stream());
  dev.default_stream().synchronize();
  return host;
}

// The unit roundoff of TF32 (10 mantissa bits), fp32 GEMMs' on tensor cores.
constexpr double kTf32Epsilon = 4.8828125e-04;  // 2^-11

// A kernel's elementwise outputs against the CPU reference: two roundings to the type, plus fp32's
// own noise.
inline double kernel_tolerance(DType t) { return 2 * dtype_epsilon(t) + 1e-5; }

// ||got - want|| / ||want||; NaN anywhere fails.
inline double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace moebench::gputest
