#include <cmath>
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/embedding.h"

namespace moebench {

namespace {
// p[0] += v: fp32 with the hardware's atomic add; a 16-bit value by compare-and-swap on its
// word (widened, added in fp32, rounded back).
__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
template <class T, class ToBits, class FromBits>
__device__ __forceinline__ void atomic_add_16(T* p, float v, ToBits to_bits, FromBits from_bits) {
  auto* word = reinterpret_cast<unsigned short*>(p);
  unsigned short old = *word, assumed;
  do {
    assumed = old;
    T cur = from_bits(assumed), next;
    cuda::store(&next, 0, cuda::load(&cur, 0) + v);
    old = atomicCAS(word, assumed, to_bits(next));
  } while (assumed != old);
}
__device__ __forceinline__ void atomic_add(__half* p, float v) {
  atomic_add_16(p, v, [](__half h) { return __half_as_ushort(h); }, [](unsigned short b) { return __ushort_as_half(b); });
}
__device__ __forceinline__ void atomic_add(__nv_bfloat16* p, float v) {
  atomic_add_16(p, v, [](__nv_bfloat16 h) { return __bfloat16_as_ushort(h); },
                [](unsigned short b) { return __ushort_as_bfloat16(b); });
}

// One block per row. A token outside the vocabulary writes NaN (the host cannot be told here;
// the CPU reference throws) and adds nothing to the table's gradient.
template <class T>
__global__ void embedding_forward_kernel(int seq, int hidden, int vocab, const int32_t* tokens, const T* table,
                                         const T* positions, T* y) {
  const int t = tokens[blockIdx.x];
  const bool valid = t >= 0 && t < vocab;
  const size_t out = size_t(blockIdx.x) * hidden, pos = size_t(blockIdx.x % unsigned(seq)) * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x)
    cuda::store(y, out + c, valid ? cuda::load(table, size_t(t) * hidden + c) + cuda::load(positions, pos + c) : NAN);
}

template <class T>
__global__ void embedding_backward_kernel(int seq, int hidden, int vocab, const int32_t* tokens, const T* dy, T* dtable,
                                          T* dpositions) {
  const int t = tokens[blockIdx.x];
  const size_t in = size_t(blockIdx.x) * hidden, pos = size_t(blockIdx.x % unsigned(seq)) * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    const float g = cuda::load(dy, in + c);
    if (t >= 0 && t < vocab) atomic_add(dtable + size_t(t) * hidden + c, g);
    atomic_add(dpositions + pos + c, g);
  }
}
}  // namespace

void embedding_forward_cuda(const EmbeddingShape& s, const std::int32_t* tokens, const void* table, const void* positions,
                            void* y, DType t, void* stream) {
  if (s.rows == 0) return;
  cuda::dispatch_float(t, "embedding_forward", [&](auto tag) {
    using T = decltype(tag);
    embedding_forward_kernel<T><<<s.rows, 256, 0, static_cast<cudaStream_t>(stream)>>>(
        s.seq, s.hidden, s.vocab, tokens, static_cast<const T*>(table), static_cast<const T*>(positions), static_cast<T*>(y));
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void embedding_backward_cuda(const EmbeddingShape& s, const std::int32_t* tokens, const void* dy, void* dtable,
                             void* dpositions, DType t, void* stream) {
  if (s.rows == 0) return;
  cuda::dispatch_float(t, "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    embedding_backward_kernel<T><<<s.rows, 256, 0, static_cast<cudaStream_t>(stream)>>>(
        s.seq, s.hidden, s.vocab, tokens, static_cast<const T*>(dy), static_cast<T*>(dtable), static_cast<T*>(dpositions));
  });
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
