// The three phases of the positions' counting sort (kernels/capacity.h), one work item each: the
// separate kernels of capacity_cuda.cu and the routing's one-pass kernel (routing_cuda.cu) run them.
#pragma once
#include <algorithm>
#include "kernels/capacity.h"

namespace moebench::cuda {

// The assignments of (group gr, prototype z) in priority order: q = j * P + (t - gr * P),
// i.e. choice-major, then token. Their experts, relative to the prototype, are the keys.
struct Sequence {
  GateShape g;
  int per_group, tile, tiles;  // tile: assignments per tile (capacity_tile)
  int groups;
  __host__ __device__ long length() const { return long(g.k) * per_group; }
  __device__ size_t slot(int gr, int z, long q) const {
    const int j = int(q / per_group), t = gr * per_group + int(q % per_group);
    return size_t(t) * g.prototypes * g.k + size_t(z) * g.k + j;
  }
  __device__ int* tile_row(int* counts, int gr, int z, int tile) const {
    return counts + ((size_t(gr) * g.prototypes + z) * tiles + tile) * (g.experts / g.prototypes);
  }
  // Work items of each phase: tiles of every (group, prototype); (group, expert) pairs.
  __host__ __device__ int tile_items() const { return tiles * g.prototypes * groups; }
  __host__ __device__ int pairs() const { return groups * g.experts; }
};

inline Sequence capacity_sequence(const CapacityShape& c) {
  const int per_group = c.gate.tokens / c.groups;
  const long length = long(c.gate.k) * per_group;
  const int tile = capacity_tile(length);
  return Sequence{c.gate, per_group, tile, int((length + tile - 1) / tile), c.groups};
}

// (1) Tile item i (tile, then prototype, then group): counts[gr, z, tile, key], how many of the
// tile's assignments go to each expert, counted in shared memory a chunk of keys at a time, every
// entry of the tile's row written (the workspace needs no clearing before). The whole block.
constexpr int kHistogramKeys = 2048;  // keys per chunk: 8 KiB of shared memory
__device__ __forceinline__ void tile_histogram(const Sequence& sq, int item, const int* expert, int* counts) {
  __shared__ int chunk[kHistogramKeys];
  const int tile = item % sq.tiles, z = (item / sq.tiles) % sq.g.prototypes, gr = item / sq.tiles / sq.g.prototypes;
  const int F = sq.g.experts / sq.g.prototypes;
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

// (2) Pair i = (group, expert), one warp: exclusive scan of its counts over the tiles, in place,
// 32 tiles at a time (a warp-wide inclusive scan, then the chunk's total carried to the next), so
// each tile row then holds the first position of every expert in that tile; then its routed and
// kept totals.
__device__ __forceinline__ void tile_offsets(const Sequence& sq, int capacity, int i, int* counts, int* routed,
                                             int* kept) {
  const int lane = threadIdx.x & 31;
  const int E = sq.g.experts, F = E / sq.g.prototypes;
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

// (3) Tile item w, one warp: walks the tile 32 assignments at a time, in order: lanes naming the
// same expert rank among themselves (__match_any_sync), then the lowest of them advances that
// expert's running start. __syncwarp orders the reads of a start before its update.
__device__ __forceinline__ void tile_positions(const Sequence& sq, int capacity, int w, const int* expert, int* counts,
                                               int* position) {
  const int lane = threadIdx.x & 31;
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

}  // namespace moebench::cuda
