// Host fp32 values into a device buffer of another float type: 16-bit ones are rounded on the
// host into the bits both backends store. For weights at initialisation (it waits for the copy).
#pragma once
#include <vector>
#include "kernels/dtype.h"
#include "runtime/device.h"

namespace moebench {

void upload_as(Device& dev, void* dst, const std::vector<float>& values, DType t, const Stream& s);

}  // namespace moebench
