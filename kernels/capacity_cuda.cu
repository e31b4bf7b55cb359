#include <algorithm>
#include "kernels/capacity.h"
#include "kernels/cuda_check.cuh"

namespace moebench {

// The assignments of (group gr, prototype z) in priority order: q = j * P + (t - gr * P),
// i.e. choice-major, then token. Their experts, relative to the prototype, are the keys.
struct Sequence {
  GateShape g;
  int per_group, tile, tiles;  // tile: assignments per tile (capacity_tile)
  __device__ long length() const { return long(g.k) * per_group; }
  __device__ size_t slot(int gr, int z, long q) const {
    const int j = int(q / per_group), t = gr * per_group + int(q % per_group);
    return size_t(t) * g.prototypes * g.k + size_t(z) * g.k + j;
  }
  __device__ int* tile_row(int* counts, int gr, int z, int tile) const {
    return counts + ((size_t(gr) * g.prototypes + z) * tiles + tile) * (g.experts / g.prototypes);
  }
};

// (1) counts[gr, z, tile, key]: how many assignments of the tile go to each expert, counted in
// shared memory a chunk of keys at a time, every entry of the tile's row written (the workspace
// needs no clearing before).
constexpr int kHistogramKeys = 2048;  // keys per chunk: 8 KiB of shared memory
__global__ void tile_histogram_kernel(Sequence sq, const int* expert, int* counts) {
  __shared__ int chunk[kHistogramKeys];
  const int tile = blockIdx.x, z = blockIdx.y, gr = blockIdx.z, F = sq.g.experts / sq.g.prototypes;
  int* row = sq.tile_row(counts, gr, z, tile);
  const long begin = long(tile) * sq.tile, end = min(sq.length(), begin + sq.tile);
  for (int first = 0; first < F; first += kHistogramKeys) {
    const int keys = min(kHistogramKeys, F - first);
    for (int k = threadIdx.x; k < keys; k += blockDim.x) chunk[k] = 0;
    __syncthreads();
    for (long q = begin + threadIdx.x; q < end; q += blockDim.x) {
      const int key = expert[sq.slot(gr, z, q)] - z * F - first;
      if (key >= 0 && key < keys) atomicAdd(&chunk[key], 1);  // integer counts: order-free, exact
    }
    __syncthreads();
    for (int k = threadIdx.x; k < keys; k += blockDim.x) row[first + k] = chunk[k];
    __syncthreads();  // the chunk is read before the next one clears it
  }
}

// (2) One warp per (group, expert): exclusive scan of its counts over the tiles, in place, 32
// tiles at a time (a warp-wide inclusive scan, then the chunk's total carried to the next), so
// each tile row then holds the first position of every expert in that tile.
__global__ void tile_offsets_kernel(Sequence sq, int capacity, int groups, int* counts, int* routed, int* kept) {
  const int lane = threadIdx.x & 31, i = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int E = sq.g.experts, F = E / sq.g.prototypes;
  if (i >= groups * E) return;  // whole warps leave together
  const int gr = i / E, e = i % E, z = e / F, key = e % F;
  int running = 0;
  for (int first = 0; first < sq.tiles; first += 32) {
    const int tile = first + lane;
    int* c = tile < sq.tiles ? sq.tile_row(counts, gr, z, tile) + key : nullptr;
    const int here = c ? *c : 0;
    int inclusive = here;
    for (int d = 1; d < 32; d <<= 1) {
      const int below = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += below;
    }
    if (c) *c = running + inclusive - here;
    running += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  if (lane == 0) {
    routed[i] = running;
    kept[i] = capacity < 0 ? running : min(running, capacity);
  }
}

// (3) One warp per tile walks it 32 assignments at a time, in order: lanes naming the same
// expert rank among themselves (__match_any_sync), then the lowest of them advances that
// expert's running start. __syncwarp orders the reads of a start before its update.
__global__ void tile_positions_kernel(Sequence sq, int capacity, int warps_total, const int* expert, int* counts,
                                      int* position) {
  const int lane = threadIdx.x & 31, w = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (w >= warps_total) return;  // whole warps leave together
  const int tile = w % sq.tiles, z = (w / sq.tiles) % sq.g.prototypes, gr = w / sq.tiles / sq.g.prototypes;
  const int F = sq.g.experts / sq.g.prototypes;
  int* start = sq.tile_row(counts, gr, z, tile);
  const long begin = long(tile) * sq.tile, end = min(sq.length(), begin + sq.tile);
  for (long q0 = begin; q0 < end; q0 += 32) {
    const long q = q0 + lane;
    const bool valid = q < end;
    const size_t slot = valid ? sq.slot(gr, z, q) : 0;
    const int key = valid ? expert[slot] - z * F : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, key);
    const int rank = __popc(peers & ((1u << lane) - 1u));
    const int first = valid ? start[key] : 0;
    __syncwarp();
    if (valid && rank == 0) start[key] = first + __popc(peers);
    __syncwarp();
    if (valid) {
      const int pos = first + rank;
      position[slot] = (capacity < 0 || pos < capacity) ? pos : -1;
    }
  }
}

void assign_positions_cuda(const CapacityShape& c, const std::int32_t* expert, std::int32_t* position,
                           std::int32_t* routed, std::int32_t* kept, void* workspace, std::size_t workspace_bytes,
                           void* stream) {
  const GateShape& g = c.gate;
  if (g.experts == 0 || c.groups == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const int per_group = g.tokens / c.groups;
  const long length = long(g.k) * per_group;
  const int tile = capacity_tile(length);
  Sequence sq{g, per_group, tile, int((length + tile - 1) / tile)};
  const std::size_t need = assign_positions_workspace_bytes(Exec{Backend::cuda}, c);
  if (need > workspace_bytes)
    throw Error("assign_positions: workspace of " + std::to_string(workspace_bytes) + " bytes, needs " + std::to_string(need));
  int* counts = static_cast<int*>(workspace);
  if (sq.tiles > 0) {
    tile_histogram_kernel<<<dim3(sq.tiles, g.prototypes, c.groups), std::min(tile, 256), 0, s>>>(sq, expert, counts);
    MOEBENCH_CUDA_LAUNCH_CHECK();
  }
  const int pairs = c.groups * g.experts;
  const int warps_per_block = 4;
  tile_offsets_kernel<<<(pairs + warps_per_block - 1) / warps_per_block, 32 * warps_per_block, 0, s>>>(
      sq, c.capacity, c.groups, counts, routed, kept);
  MOEBENCH_CUDA_LAUNCH_CHECK();
  if (sq.tiles > 0) {
    const int warps = sq.tiles * g.prototypes * c.groups, per_block = 4;
    tile_positions_kernel<<<(warps + per_block - 1) / per_block, 32 * per_block, 0, s>>>(sq, c.capacity, warps, expert,
                                                                                         counts, position);
    MOEBENCH_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace moebench
