#include <string>
#include "kernels/segment_offsets.h"

namespace moebench {

void segment_offsets_cpu(const SegmentOffsetsArgs& a) {
  for (int g = 0; g < a.groups; ++g)
    for (int e = 0; e < a.experts; ++e) a.base[std::size_t(g) * a.experts + e] = -1;
  std::int32_t next = 0;
  for (int l = 0; l < a.count; ++l) {
    a.offset[l] = next;
    for (int g = 0; g < a.groups; ++g) {
      const std::size_t at = std::size_t(g) * a.experts + a.first + l;
      a.base[at] = next;
      next += a.kept[at];
    }
  }
  a.offset[a.count] = next;
}

void segment_offsets(const Exec& ex, const SegmentOffsetsArgs& a) {
  if (a.groups < 1 || a.count < 0 || a.first < 0 || a.first + a.count > a.experts)
    throw Error("segment_offsets: experts [" + std::to_string(a.first) + ", " + std::to_string(a.first + a.count) +
                ") of " + std::to_string(a.experts) + " in " + std::to_string(a.groups) + " groups is not a range of them");
  if (ex.backend == Backend::cuda) return segment_offsets_cuda(a, ex.stream);
  run_host(ex, "segment_offsets", [a] { segment_offsets_cpu(a); });
}

#if !MOEBENCH_WITH_CUDA
void segment_offsets_cuda(const SegmentOffsetsArgs&, void*) { cuda_not_built("segment_offsets"); }
#endif

}  // namespace moebench
