// One block of 1024 threads: thread l sums local expert l's kept counts over the groups, the
// block scans the sums (1024 experts a round, the carry between rounds), and each thread writes
// its expert's group bases. The other experts' bases are -1, written by a grid-stride loop first.
#include "kernels/cuda_check.cuh"
#include "kernels/segment_offsets.h"

namespace moebench {
namespace {

constexpr int kOffsetThreads = 1024;

__global__ void __launch_bounds__(kOffsetThreads) segment_offsets_kernel(SegmentOffsetsArgs a) {
  __shared__ int scan[kOffsetThreads];
  const int t = threadIdx.x;
  for (int i = t; i < a.groups * a.experts; i += kOffsetThreads) {
    const int e = i % a.experts;
    if (e < a.first || e >= a.first + a.count) a.base[i] = -1;
  }
  int carry = 0;
  for (int round = 0; round < a.count; round += kOffsetThreads) {
    const int l = round + t;
    int mine = 0;
    if (l < a.count)
      for (int g = 0; g < a.groups; ++g) mine += a.kept[g * a.experts + a.first + l];
    scan[t] = mine;
    __syncthreads();
    for (int d = 1; d < kOffsetThreads; d <<= 1) {  // inclusive Hillis-Steele scan
      const int up = t >= d ? scan[t - d] : 0;
      __syncthreads();
      scan[t] += up;
      __syncthreads();
    }
    if (l < a.count) {
      int next = carry + scan[t] - mine;
      a.offset[l] = next;
      for (int g = 0; g < a.groups; ++g) {
        const int at = g * a.experts + a.first + l;
        a.base[at] = next;
        next += a.kept[at];
      }
    }
    carry += scan[kOffsetThreads - 1];
    __syncthreads();
  }
  if (t == 0) a.offset[a.count] = carry;
}

}  // namespace

void segment_offsets_cuda(const SegmentOffsetsArgs& a, void* stream) {
  segment_offsets_kernel<<<1, kOffsetThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
