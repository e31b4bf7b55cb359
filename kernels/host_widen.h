// The CPU backend's 16-bit storage: its fp32 reference kernels run on widened copies of fp16 /
// bf16 operands, and what they write is narrowed back (rounded to nearest even) -- fp32
// arithmetic on 16-bit storage, as the CUDA kernels compute. An operand is a view of `rows`
// rows of `cols` elements, `ld` apart (a vector: one row); only the view's elements are read
// or written, so a view into a wider buffer (one head's columns) leaves its neighbours alone.
// fp32 operands are used in place.
#pragma once
#include <cstddef>
#include <vector>
#include "kernels/dtype.h"

namespace moebench {

class WidenedView {
 public:
  // `read`: fill the copy from the operand (an input, or an output that is added to).
  WidenedView(const void* p, DType t, std::size_t rows, std::size_t cols, std::size_t ld, bool read);
  // A vector of n elements.
  WidenedView(const void* p, DType t, std::size_t n, bool read) : WidenedView(p, t, n ? 1 : 0, n, n, read) {}
  float* data() { return f_; }
  // Writes the copy back into the operand (an output).
  void narrow();

 private:
  void* p_;
  DType t_;
  std::size_t rows_, cols_, ld_;
  std::vector<float> copy_;
  float* f_;
};

}  // namespace moebench
