// The expert-major layout of kept assignments computed on the device from the gate's kept counts,
// so that nothing waits for them on the host (the segment GEMMs' bounds, kernels/segment_gemm.h):
// for the experts [first, first + count) of `experts`, expert by expert and group by group inside
// an expert,
//   base[g, e]  = the first row of group g's assignments to expert e (-1 outside the range),
//   offset[l]   = the first row of local expert l, offset[count] = the rows in all.
// moe/dispatcher_rows.h's expert_major_bases is the same layout from host counts.
#pragma once
#include <cstdint>
#include "kernels/exec.h"

namespace moebench {

struct SegmentOffsetsArgs {
  int groups = 1, experts = 0, first = 0, count = 0;
  const std::int32_t* kept = nullptr;  // [groups, experts]
  std::int32_t* base = nullptr;        // [groups, experts]
  std::int32_t* offset = nullptr;      // [count + 1]
};

void segment_offsets(const Exec& ex, const SegmentOffsetsArgs& a);
void segment_offsets_cpu(const SegmentOffsetsArgs& a);
void segment_offsets_cuda(const SegmentOffsetsArgs& a, void* stream);

}  // namespace moebench
