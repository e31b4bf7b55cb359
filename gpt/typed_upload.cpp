#include "gpt/typed_upload.h"
#include <cstdint>
#include "kernels/convert.h"

namespace moebench {

void upload_as(Device& dev, void* dst, const std::vector<float>& values, DType t, const Stream& s) {
  if (t == DType::f32) {
    dev.copy_to_device(dst, values.data(), values.size() * 4, s);
    s.synchronize();
    return;
  }
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = to_bits16(t, values[i]);
  dev.copy_to_device(dst, bits.data(), bits.size() * 2, s);
  s.synchronize();  // `bits` goes out of scope
}

}  // namespace moebench
