// Block-wide reductions for the row kernels (blockDim.x a multiple of 32, at most 1024).
#pragma once
#include <cfloat>

namespace moebench::cuda {

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Every thread gets the block's sum (or max). Uses 32 floats of shared scratch. Barriers
// separate every write of scratch from the reads of it (racecheck-clean): only warp 0 reads
// the per-warp partials, and the result is written after everyone has finished reading.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : (kMax ? -FLT_MAX : 0.f);
    v = kMax ? warp_max(v) : warp_sum(v);
  }
  __syncthreads();  // warp 0 has read every partial before slot 0 is overwritten
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  return scratch[0];
}

// Online softmax's reduction: (m, s) stands for s = sum of exp(x - m) over some values; two such
// pairs combine into one at the larger m. Every thread gets the block's pair; 64 floats of
// shared scratch (sm, ss), barriers as in block_reduce.
__device__ __forceinline__ void combine_max_sum(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  s = s * __expf(m - nm) + os * __expf(om - nm);
  m = nm;
}
__device__ __forceinline__ void block_max_sum(float& m, float& s, float* sm, float* ss) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1)
    combine_max_sum(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  __syncthreads();
  if (lane == 0) { sm[warp] = m; ss[warp] = s; }
  __syncthreads();
  if (warp == 0) {
    m = lane < warps ? sm[lane] : -FLT_MAX;
    s = lane < warps ? ss[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1)
      combine_max_sum(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  }
  __syncthreads();
  if (threadIdx.x == 0) { sm[0] = m; ss[0] = s; }
  __syncthreads();
  m = sm[0];
  s = ss[0];
}

// Arg-max over the block: larger value wins, ties go to the lower index.
__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) { v = ov; i = oi; }
}
__device__ __forceinline__ void block_argmax(float& v, int& i, float* sv, int* si) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1) better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
  __syncthreads();
  if (lane == 0) { sv[warp] = v; si[warp] = i; }
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? sv[lane] : -FLT_MAX;
    i = lane < warps ? si[lane] : 0x7fffffff;
    for (int o = 16; o > 0; o >>= 1) better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
  }
  __syncthreads();  // as in block_reduce: reads of the partials end before slot 0 is written
  if (threadIdx.x == 0) { sv[0] = v; si[0] = i; }
  __syncthreads();
  v = sv[0];
  i = si[0];
}

}  // namespace moebench::cuda
