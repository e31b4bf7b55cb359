#include "kernels/host_widen.h"
#include <cstdint>
#include <string>
#include "kernels/convert.h"
#include "kernels/exec.h"

namespace moebench {

WidenedView::WidenedView(const void* p, DType t, std::size_t rows, std::size_t cols, std::size_t ld, bool read)
    : p_(const_cast<void*>(p)), t_(t), rows_(rows), cols_(cols), ld_(ld), f_(static_cast<float*>(p_)) {
  if (t == DType::f32) return;
  if (!is_float(t)) throw Error("a CPU kernel on " + std::string(dtype_name(t)) + " data; allowed: fp32, fp16 and bf16");
  copy_.assign(rows ? (rows - 1) * ld + cols : 0, 0.f);
  f_ = copy_.data();
  if (!read) return;
  const auto* src = static_cast<const std::uint16_t*>(p_);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) copy_[r * ld + c] = from_bits16(t, src[r * ld + c]);
}

void WidenedView::narrow() {
  if (t_ == DType::f32) return;
  auto* dst = static_cast<std::uint16_t*>(p_);
  for (std::size_t r = 0; r < rows_; ++r)
    for (std::size_t c = 0; c < cols_; ++c) dst[r * ld_ + c] = to_bits16(t_, copy_[r * ld_ + c]);
}

}  // namespace moebench
