#include <algorithm>
#include "kernels/capacity.h"
#include "kernels/capacity_tiles.cuh"
#include "kernels/cuda_check.cuh"

namespace moebench {

using cuda::Sequence;

__global__ void tile_histogram_kernel(Sequence sq, const int* expert, int* counts) {
  cuda::tile_histogram(sq, blockIdx.x, expert, counts);
}

__global__ void tile_offsets_kernel(Sequence sq, int capacity, int* counts, int* routed, int* kept) {
  const int i = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (i >= sq.pairs()) return;  // whole warps leave together
  cuda::tile_offsets(sq, capacity, i, counts, routed, kept);
}

__global__ void tile_positions_kernel(Sequence sq, int capacity, const int* expert, int* counts, int* position) {
  const int w = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (w >= sq.tile_items()) return;  // whole warps leave together
  cuda::tile_positions(sq, capacity, w, expert, counts, position);
}

void assign_positions_cuda(const CapacityShape& c, const std::int32_t* expert, std::int32_t* position,
                           std::int32_t* routed, std::int32_t* kept, void* workspace, std::size_t workspace_bytes,
                           void* stream) {
  if (c.gate.experts == 0 || c.groups == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const Sequence sq = cuda::capacity_sequence(c);
  const std::size_t need = assign_positions_workspace_bytes(Exec{Backend::cuda}, c);
  if (need > workspace_bytes)
    throw Error("assign_positions: workspace of " + std::to_string(workspace_bytes) + " bytes, needs " + std::to_string(need));
  int* counts = static_cast<int*>(workspace);
  if (sq.tiles > 0) {
    tile_histogram_kernel<<<sq.tile_items(), std::min(sq.tile, 256), 0, s>>>(sq, expert, counts);
    MOEBENCH_CUDA_LAUNCH_CHECK();
  }
  const int warps_per_block = 4;
  tile_offsets_kernel<<<(sq.pairs() + warps_per_block - 1) / warps_per_block, 32 * warps_per_block, 0, s>>>(
      sq, c.capacity, counts, routed, kept);
  MOEBENCH_CUDA_LAUNCH_CHECK();
  if (sq.tiles > 0) {
    tile_positions_kernel<<<(sq.tile_items() + warps_per_block - 1) / warps_per_block, 32 * warps_per_block, 0, s>>>(
        sq, c.capacity, expert, counts, position);
    MOEBENCH_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace moebench
