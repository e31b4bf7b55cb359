#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/permute.h"

namespace moebench {

constexpr int kRowThreads = 256;

// One block per token; threads stride over the hidden dimension. Per-token ownership keeps
// every sum in a fixed order (deterministic, no atomics).
template <class T>
__global__ void dispatch_rows_kernel(RowMap m, const T* x, T* rows) {
  const int t = blockIdx.x;
  for (int s = 0; s < m.slots; ++s) {
    const int r = m.row_of[size_t(t) * m.slots + s];
    if (r < 0) continue;
    for (int i = threadIdx.x; i < m.hidden; i += blockDim.x) rows[size_t(r) * m.hidden + i] = x[size_t(t) * m.hidden + i];
  }
}

template <class T>
__global__ void combine_rows_kernel(RowMap m, const T* rows, const float* weight, T* out, bool accumulate) {
  const int t = blockIdx.x;
  for (int i = threadIdx.x; i < m.hidden; i += blockDim.x) {
    float acc = accumulate ? cuda::load(out, size_t(t) * m.hidden + i) : 0.f;
    for (int s = 0; s < m.slots; ++s) {
      const size_t slot = size_t(t) * m.slots + s;
      const int r = m.row_of[slot];
      if (r >= 0) acc += weight[slot] * cuda::load(rows, size_t(r) * m.hidden + i);
    }
    cuda::store(out, size_t(t) * m.hidden + i, acc);
  }
}

template <class T>
__global__ void combine_rows_backward_kernel(RowMap m, const T* dout, const T* rows, const float* weight, T* drows,
                                             float* dweight, bool slice) {
  __shared__ float scratch[32];
  const int t = blockIdx.x;
  for (int s = 0; s < m.slots; ++s) {
    const size_t slot = size_t(t) * m.slots + s;
    const int r = m.row_of[slot];
    if (r < 0) {
      if (threadIdx.x == 0 && !slice) dweight[slot] = 0.f;
      continue;
    }
    float dot = 0.f;
    for (int i = threadIdx.x; i < m.hidden; i += blockDim.x) {
      const float d = cuda::load(dout, size_t(t) * m.hidden + i);
      dot += d * cuda::load(rows, size_t(r) * m.hidden + i);
      cuda::store(drows, size_t(r) * m.hidden + i, weight[slot] * d);
    }
    dot = cuda::block_reduce<false>(dot, scratch);
    if (threadIdx.x == 0) dweight[slot] = dot;
  }
}

template <class T>
__global__ void dispatch_rows_backward_kernel(RowMap m, const T* drows, T* dx, bool accumulate) {
  const int t = blockIdx.x;
  for (int i = threadIdx.x; i < m.hidden; i += blockDim.x) {
    float acc = accumulate ? cuda::load(dx, size_t(t) * m.hidden + i) : 0.f;
    for (int s = 0; s < m.slots; ++s) {
      const int r = m.row_of[size_t(t) * m.slots + s];
      if (r >= 0) acc += cuda::load(drows, size_t(r) * m.hidden + i);
    }
    cuda::store(dx, size_t(t) * m.hidden + i, acc);
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
    dispatch_rows_kernel<T><<<m.tokens, kRowThreads, 0, cs(stream)>>>(m, static_cast<const T*>(x), static_cast<T*>(rows));
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void combine_rows_cuda(const RowMap& m, const void* rows, const float* weight, void* out, bool accumulate, DType t,
                       void* stream) {
  if (m.tokens == 0) return;
  cuda::dispatch_float(t, "combine_rows", [&](auto tag) {
    using T = decltype(tag);
    combine_rows_kernel<T><<<m.tokens, kRowThreads, 0, cs(stream)>>>(m, static_cast<const T*>(rows), weight,
                                                                      static_cast<T*>(out), accumulate);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void combine_rows_backward_cuda(const RowMap& m, const void* dout, const void* rows, const float* weight, void* drows,
                                float* dweight, bool slice, DType t, void* stream) {
  if (m.tokens == 0) return;
  cuda::dispatch_float(t, "combine_rows_backward", [&](auto tag) {
    using T = decltype(tag);
    combine_rows_backward_kernel<T><<<m.tokens, kRowThreads, 0, cs(stream)>>>(
        m, static_cast<const T*>(dout), static_cast<const T*>(rows), weight, static_cast<T*>(drows), dweight, slice);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void dispatch_rows_backward_cuda(const RowMap& m, const void* drows, void* dx, bool accumulate, DType t, void* stream) {
  if (m.tokens == 0) return;
  cuda::dispatch_float(t, "dispatch_rows_backward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_rows_backward_kernel<T><<<m.tokens, kRowThreads, 0, cs(stream)>>>(m, static_cast<const T*>(drows),
                                                                                static_cast<T*>(dx), accumulate);
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
