#include "runtime/block_size.h"
#include <bit>

namespace moebench {

std::size_t pool_block_size(std::size_t bytes) {
  if (bytes > (std::size_t(1) << 62)) return bytes;  // no rounding could be held: the system refuses it as it is
  const std::size_t aligned = (bytes + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment;
  if (aligned <= kFineBlockLimit) return aligned;
  // The doubling [2^p, 2^(p+1)) that holds the request, in kClassesPerDoubling equal steps.
  const int p = std::bit_width(aligned) - 1;
  const std::size_t step = std::size_t(1) << (p - std::bit_width(unsigned(kClassesPerDoubling)) + 1);
  return (aligned + step - 1) / step * step;
}

}  // namespace moebench
