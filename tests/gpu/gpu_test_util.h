// Helpers for comparing a CUDA op to its CPU reference: random fp32 data rounded to the
// tested dtype, upload/convert, download/convert, and the relative L2 error.
#pragma once
#include <gtest/gtest.h>
#include <cmath>
#include <optional>
#include <random>
#include <vector>
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "kernels/convert.h"

namespace moebench::gputest {

// The CUDA device, or a skip with the reason when there is none.
#define MOEBENCH_REQUIRE_GPU(dev)                                                   \
  std::string why_no_gpu_;                                                          \
  if (Device::cuda_device_count(&why_no_gpu_) == 0) GTEST_SKIP() << "no GPU: " << why_no_gpu_; \
  Device dev = Device::open(Backend::cuda, 0)

inline std::vector<float> random_rounded(std::size_t n, DType t, unsigned seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = round_to(t, d(rng));
  return v;
}

// A device buffer of `t` holding `host`.
inline Buffer upload(Device& dev, TrackingAllocator& alloc, const std::vector<float>& host, DType t) {
  Buffer staging = alloc.allocate(host.size() * 4, MemTag::temporary);
  Buffer out = alloc.allocate(host.size() * dtype_size(t), MemTag::activations);
  dev.copy_to_device(staging.data(), host.data(), host.size() * 4, dev.default_stream());
  convert_cuda(staging.data(), DType::f32, out.data(), t, host.size(), dev.default_stream().handle);
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
