#include "kernels/capacity.h"
#include "kernels/cuda_check.cuh"

namespace moebench {

// One thread per (group, expert) walks its group's assignments in priority order, so
// positions follow exactly the CPU order without a sort. Threads of a warp mostly read the
// same slot (one prototype), which the cache serves as a broadcast.
__global__ void assign_positions_kernel(CapacityShape c, const int* expert, int* position, int* routed, int* kept) {
  const GateShape g = c.gate;
  const int e = blockIdx.x * blockDim.x + threadIdx.x, gr = blockIdx.y;
  if (e >= g.experts) return;
  const int F = g.experts / g.prototypes, z = e / F, S = g.prototypes * g.k, per_group = g.tokens / c.groups;
  int count = 0;
  for (int j = 0; j < g.k; ++j)
    for (int t = gr * per_group; t < (gr + 1) * per_group; ++t) {
      const size_t slot = size_t(t) * S + size_t(z) * g.k + j;
      if (expert[slot] == e) {
        position[slot] = (c.capacity < 0 || count < c.capacity) ? count : -1;
        ++count;
      }
    }
  routed[size_t(gr) * g.experts + e] = count;
  kept[size_t(gr) * g.experts + e] = c.capacity < 0 ? count : min(count, c.capacity);
}

void assign_positions_cuda(const CapacityShape& c, const std::int32_t* expert, std::int32_t* position,
                           std::int32_t* routed, std::int32_t* kept, void* stream) {
  if (c.gate.experts == 0) return;
  assign_positions_kernel<<<dim3((c.gate.experts + 127) / 128, c.groups), 128, 0, static_cast<cudaStream_t>(stream)>>>(
      c, expert, position, routed, kept);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
