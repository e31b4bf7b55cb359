#include <string>
#include <type_traits>
#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/permute.h"

namespace moebench {

constexpr int kRowThreads = 256;

// One block per token; threads stride over the hidden dimension. Per-token ownership keeps
// every sum in a fixed order (deterministic, no atomics). The kernels are memory-bound: where
// every row starts aligned for it (`quads` = hidden / 4, else 0) a thread moves four values an
// access, and the rest of a row (all of it when quads is 0) one at a time.

// Four values copied as they are: one 16-byte (fp32) or 8-byte (16-bit) load and store.
template <class T>
__device__ __forceinline__ void copy4(const T* src, T* dst) {
  using Quad = std::conditional_t<sizeof(T) == 4, float4, uint2>;
  *reinterpret_cast<Quad*>(dst) = *reinterpret_cast<const Quad*>(src);
}

template <class T>
__global__ void dispatch_rows_kernel(RowMap m, int quads, const T* x, T* rows) {
  const int t = blockIdx.x;
  const T* in = x + size_t(t) * m.hidden;
  for (int s = 0; s < m.slots; ++s) {
    const int r = m.row_of[size_t(t) * m.slots + s];
    if (r < 0) continue;
    T* out = rows + size_t(r) * m.hidden;
    for (int q = threadIdx.x; q < quads; q += blockDim.x) copy4(in + 4 * q, out + 4 * q);
    for (int i = 4 * quads + threadIdx.x; i < m.hidden; i += blockDim.x) out[i] = in[i];
  }
}

template <class T>
__global__ void combine_rows_kernel(RowMap m, int quads, const T* rows, const float* weight, T* out, bool accumulate) {
  const int t = blockIdx.x;
  const size_t o = size_t(t) * m.hidden;
  for (int q = threadIdx.x; q < quads; q += blockDim.x) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    if (accumulate) cuda::load4(out, o + 4 * q, acc);
    for (int s = 0; s < m.slots; ++s) {
      const size_t slot = size_t(t) * m.slots + s;
      const int r = m.row_of[slot];
      if (r < 0) continue;
      float v[4];
      cuda::load4(rows, size_t(r) * m.hidden + 4 * q, v);
      for (int e = 0; e < 4; ++e) acc[e] += weight[slot] * v[e];
    }
    cuda::store4(out, o + 4 * q, acc);
  }
  for (int i = 4 * quads + threadIdx.x; i < m.hidden; i += blockDim.x) {
    float acc = accumulate ? cuda::load(out, o + i) : 0.f;
    for (int s = 0; s < m.slots; ++s) {
      const size_t slot = size_t(t) * m.slots + s;
      const int r = m.row_of[slot];
      if (r >= 0) acc += weight[slot] * cuda::load(rows, size_t(r) * m.hidden + i);
    }
    cuda::store(out, o + i, acc);
  }
}

// The slots' dot products reduced together: each warp's sum per slot into shared memory
// ([warps][slots]), one barrier, then a thread per slot adds the warps' sums in order -- where a
// block reduction per slot took four barriers each.
template <class T>
__global__ void combine_rows_backward_kernel(RowMap m, int quads, const T* dout, const T* rows, const float* weight,
                                             T* drows, float* dweight, bool slice) {
  extern __shared__ float warp_dots[];
  const int t = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const size_t o = size_t(t) * m.hidden;
  for (int s = 0; s < m.slots; ++s) {
    const size_t slot = size_t(t) * m.slots + s;
    const int r = m.row_of[slot];  // the block's: every warp takes the same branch
    float dot = 0.f;
    if (r >= 0) {
      const size_t ro = size_t(r) * m.hidden;
      const float w = weight[slot];
      for (int q = threadIdx.x; q < quads; q += blockDim.x) {
        float d[4], v[4];
        cuda::load4(dout, o + 4 * q, d);
        cuda::load4(rows, ro + 4 * q, v);
        for (int e = 0; e < 4; ++e) dot += d[e] * v[e], d[e] *= w;
        cuda::store4(drows, ro + 4 * q, d);
      }
      for (int i = 4 * quads + threadIdx.x; i < m.hidden; i += blockDim.x) {
        const float d = cuda::load(dout, o + i);
        dot += d * cuda::load(rows, ro + i);
        cuda::store(drows, ro + i, w * d);
      }
    }
    dot = cuda::warp_sum(dot);
    if (lane == 0) warp_dots[warp * m.slots + s] = dot;
  }
  __syncthreads();
  for (int s = threadIdx.x; s < m.slots; s += blockDim.x) {
    const size_t slot = size_t(t) * m.slots + s;
    if (m.row_of[slot] < 0) {
      if (!slice) dweight[slot] = 0.f;
      continue;
    }
    float sum = 0.f;
    for (int w = 0; w < warps; ++w) sum += warp_dots[w * m.slots + s];
    dweight[slot] = sum;
  }
}

template <class T>
__global__ void dispatch_rows_backward_kernel(RowMap m, int quads, const T* drows, T* dx, bool accumulate) {
  const int t = blockIdx.x;
  const size_t o = size_t(t) * m.hidden;
  for (int q = threadIdx.x; q < quads; q += blockDim.x) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    if (accumulate) cuda::load4(dx, o + 4 * q, acc);
    for (int s = 0; s < m.slots; ++s) {
      const int r = m.row_of[size_t(t) * m.slots + s];
      if (r < 0) continue;
      float v[4];
      cuda::load4(drows, size_t(r) * m.hidden + 4 * q, v);
      for (int e = 0; e < 4; ++e) acc[e] += v[e];
    }
    cuda::store4(dx, o + 4 * q, acc);
  }
  for (int i = 4 * quads + threadIdx.x; i < m.hidden; i += blockDim.x) {
    float acc = accumulate ? cuda::load(dx, o + i) : 0.f;
    for (int s = 0; s < m.slots; ++s) {
      const int r = m.row_of[size_t(t) * m.slots + s];
      if (r >= 0) acc += cuda::load(drows, size_t(r) * m.hidden + i);
    }
    cuda::store(dx, o + i, acc);
  }
}

__global__ void build_row_map_kernel(RowMapSource src, int* row_of) {
  const size_t n = size_t(src.tokens) * src.slots;
  const int per_group = src.tokens / src.groups;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int t = int(i / src.slots);
    const int pos = src.position[i];
    const int b = src.base[size_t(t / per_group) * src.experts + src.expert[i]];
    row_of[i] = (pos >= 0 && b >= 0) ? b + pos : -1;
  }
}

static cudaStream_t cs(void* s) { return static_cast<cudaStream_t>(s); }

// hidden / 4 where every row of every array starts aligned for four values, else 0.
template <class T, class... P>
static int quads_of(const RowMap& m, const P*... arrays) {
  const bool aligned = m.hidden % 4 == 0 && (cuda::aligned4(static_cast<const T*>(arrays)) && ...);
  return aligned ? m.hidden / 4 : 0;
}

void build_row_map_cuda(const RowMapSource& src, std::int32_t* row_of, void* stream) {
  const size_t n = size_t(src.tokens) * src.slots;
  if (n == 0) return;
  build_row_map_kernel<<<cuda::grid_for(n, 256), 256, 0, cs(stream)>>>(src, row_of);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void dispatch_rows_cuda(const RowMap& m, const void* x, void* rows, DType t, void* stream) {
  if (m.tokens == 0) return;
  cuda::dispatch_float(t, "dispatch_rows", [&](auto tag) {
    using T = decltype(tag);
    dispatch_rows_kernel<T><<<m.tokens, kRowThreads, 0, cs(stream)>>>(m, quads_of<T>(m, x, rows), static_cast<const T*>(x),
                                                                        static_cast<T*>(rows));
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void combine_rows_cuda(const RowMap& m, const void* rows, const float* weight, void* out, bool accumulate, DType t,
                       void* stream) {
  if (m.tokens == 0) return;
  cuda::dispatch_float(t, "combine_rows", [&](auto tag) {
    using T = decltype(tag);
    combine_rows_kernel<T><<<m.tokens, kRowThreads, 0, cs(stream)>>>(m, quads_of<T>(m, rows, out), static_cast<const T*>(rows),
                                                                      weight, static_cast<T*>(out), accumulate);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void combine_rows_backward_cuda(const RowMap& m, const void* dout, const void* rows, const float* weight, void* drows,
                                float* dweight, bool slice, DType t, void* stream) {
  if (m.tokens == 0) return;
  const size_t dots_bytes = size_t(kRowThreads / 32) * m.slots * sizeof(float);
  if (dots_bytes > 48 * 1024)
    throw Error("combine_rows_backward: " + std::to_string(m.slots) + " slots a token; allowed: up to " +
                std::to_string(48 * 1024 / (kRowThreads / 32 * sizeof(float))));
  cuda::dispatch_float(t, "combine_rows_backward", [&](auto tag) {
    using T = decltype(tag);
    combine_rows_backward_kernel<T><<<m.tokens, kRowThreads, dots_bytes, cs(stream)>>>(
        m, quads_of<T>(m, dout, rows, drows), static_cast<const T*>(dout), static_cast<const T*>(rows), weight,
        static_cast<T*>(drows), dweight, slice);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void dispatch_rows_backward_cuda(const RowMap& m, const void* drows, void* dx, bool accumulate, DType t, void* stream) {
  if (m.tokens == 0) return;
  cuda::dispatch_float(t, "dispatch_rows_backward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_rows_backward_kernel<T><<<m.tokens, kRowThreads, 0, cs(stream)>>>(
        m, quads_of<T>(m, drows, dx), static_cast<const T*>(drows), static_cast<T*>(dx), accumulate);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
