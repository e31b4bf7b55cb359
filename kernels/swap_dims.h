// The attention's change of layout between token-major rows and head-major blocks: a tensor of
// [outer, inner, width] elements becomes [inner, outer, width] (the first two dimensions swapped,
// each width-element vector moved whole). QKV rows [tokens, 3 heads, d] become [3 heads, tokens,
// d], where one sequence of one head is a contiguous [seq, d] block seq * d elements after the
// previous sequence's -- and after the previous head's last -- so one strided batch covers every
// (head, sequence); [heads, tokens, d] goes back to rows the same way.
#pragma once
#include <cstddef>
#include "kernels/exec.h"

namespace moebench {

void swap_dims_cpu(int outer, int inner, std::size_t width_bytes, const void* src, void* dst);
void swap_dims_cuda(int outer, int inner, std::size_t width_bytes, const void* src, void* dst, void* stream);
// dst [inner, outer, width] = src [outer, inner, width], elements of `element_bytes`; src and dst
// must not overlap.
void swap_dims(const Exec& ex, int outer, int inner, int width, std::size_t element_bytes, const void* src, void* dst);

}  // namespace moebench
