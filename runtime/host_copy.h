// Host copies of device tensors as fp32, for dumps and checks in the MoE benches.
#pragma once
#include <vector>
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "kernels/convert.h"

namespace moebench {

inline std::vector<float> host_f32(Device& dev, TrackingAllocator& alloc, const void* src, std::size_t n, DType t) {
  std::vector<float> out(n);
  if (t == DType::f32) {
    dev.copy_to_host(out.data(), src, n * 4, dev.default_stream());
    return out;
  }
  Buffer staging = alloc.allocate(n * 4, MemTag::temporary);
  convert_cuda(src, t, staging.data(), DType::f32, n, dev.default_stream().handle);
  dev.copy_to_host(out.data(), staging.data(), n * 4, dev.default_stream());
  return out;
}

// A device tensor of `t` holding host fp32 values.
inline Buffer device_from_f32(Device& dev, TrackingAllocator& alloc, const std::vector<float>& host, DType t, MemTag tag) {
  Buffer out = alloc.allocate(host.size() * dtype_size(t), tag);
  if (t == DType::f32) {
    dev.copy_to_device(out.data(), host.data(), host.size() * 4, dev.default_stream());
    return out;
  }
  Buffer staging = alloc.allocate(host.size() * 4, MemTag::temporary);
  dev.copy_to_device(staging.data(), host.data(), host.size() * 4, dev.default_stream());
  convert_cuda(staging.data(), DType::f32, out.data(), t, host.size(), dev.default_stream().handle);
  dev.synchronize();
  return out;
}

}  // namespace moebench
