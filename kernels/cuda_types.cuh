// Loads and stores between fp32 registers and fp32/fp16/bf16 memory, and the switch from a
// runtime DType to a templated launch.
#pragma once
#include <type_traits>
#include <cuda_bf16.h>
#include <cstdint>
#include <cuda_fp16.h>
#include <library_types.h>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench::cuda {

template <class T> __device__ __forceinline__ float load(const T* p, size_t i);
template <> __device__ __forceinline__ float load<float>(const float* p, size_t i) { return p[i]; }
template <> __device__ __forceinline__ float load<__half>(const __half* p, size_t i) { return __half2float(p[i]); }
template <> __device__ __forceinline__ float load<__nv_bfloat16>(const __nv_bfloat16* p, size_t i) { return __bfloat162float(p[i]); }

template <class T> __device__ __forceinline__ void store(T* p, size_t i, float v);
template <> __device__ __forceinline__ void store<float>(float* p, size_t i, float v) { p[i] = v; }
template <> __device__ __forceinline__ void store<__half>(__half* p, size_t i, float v) { p[i] = __float2half_rn(v); }
template <> __device__ __forceinline__ void store<__nv_bfloat16>(__nv_bfloat16* p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// Four consecutive values at p + i, i a multiple of 4 and p aligned to four values: one 16-byte
// (fp32) or 8-byte (16-bit) access instead of four, each value rounded as load/store round it.
template <class T> __device__ __forceinline__ void load4(const T* p, size_t i, float (&out)[4]);
template <> __device__ __forceinline__ void load4<float>(const float* p, size_t i, float (&out)[4]) {
  const float4 q = *reinterpret_cast<const float4*>(p + i);
  out[0] = q.x, out[1] = q.y, out[2] = q.z, out[3] = q.w;
}
template <> __device__ __forceinline__ void load4<__half>(const __half* p, size_t i, float (&out)[4]) {
  const uint2 q = *reinterpret_cast<const uint2*>(p + i);
  const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&q.x)), hi = __half22float2(*reinterpret_cast<const __half2*>(&q.y));
  out[0] = lo.x, out[1] = lo.y, out[2] = hi.x, out[3] = hi.y;
}
template <> __device__ __forceinline__ void load4<__nv_bfloat16>(const __nv_bfloat16* p, size_t i, float (&out)[4]) {
  const uint2 q = *reinterpret_cast<const uint2*>(p + i);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&q.x)),
               hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&q.y));
  out[0] = lo.x, out[1] = lo.y, out[2] = hi.x, out[3] = hi.y;
}

template <class T> __device__ __forceinline__ void store4(T* p, size_t i, const float (&v)[4]);
template <> __device__ __forceinline__ void store4<float>(float* p, size_t i, const float (&v)[4]) {
  *reinterpret_cast<float4*>(p + i) = make_float4(v[0], v[1], v[2], v[3]);
}
template <> __device__ __forceinline__ void store4<__half>(__half* p, size_t i, const float (&v)[4]) {
  uint2 q;
  *reinterpret_cast<__half2*>(&q.x) = __floats2half2_rn(v[0], v[1]);
  *reinterpret_cast<__half2*>(&q.y) = __floats2half2_rn(v[2], v[3]);
  *reinterpret_cast<uint2*>(p + i) = q;
}
template <> __device__ __forceinline__ void store4<__nv_bfloat16>(__nv_bfloat16* p, size_t i, const float (&v)[4]) {
  uint2 q;
  *reinterpret_cast<__nv_bfloat162*>(&q.x) = __floats2bfloat162_rn(v[0], v[1]);
  *reinterpret_cast<__nv_bfloat162*>(&q.y) = __floats2bfloat162_rn(v[2], v[3]);
  *reinterpret_cast<uint2*>(p + i) = q;
}

// Whether p can be read four values at a time.
template <class T> inline bool aligned4(const T* p) { return reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(T)) == 0; }

// Sixteen bytes of values at p + i, i a multiple of their count (4 fp32, 8 16-bit) and p aligned to
// 16 bytes: one access, the widest a thread makes, for the memory-bound elementwise kernels.
template <class T> constexpr int kWide = 16 / int(sizeof(T));
template <class T> __device__ __forceinline__ void load_wide(const T* p, size_t i, float (&out)[kWide<T>]) {
  if constexpr (sizeof(T) == 4) {
    load4(p, i, out);
  } else {
    const uint4 q = *reinterpret_cast<const uint4*>(p + i);
    const unsigned words[4] = {q.x, q.y, q.z, q.w};
    for (int w = 0; w < 4; ++w) {
      float2 f;
      if constexpr (std::is_same_v<T, __half>) f = __half22float2(*reinterpret_cast<const __half2*>(&words[w]));
      else f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[w]));
      out[2 * w] = f.x, out[2 * w + 1] = f.y;
    }
  }
}
template <class T> __device__ __forceinline__ void store_wide(T* p, size_t i, const float (&v)[kWide<T>]) {
  if constexpr (sizeof(T) == 4) {
    store4(p, i, v);
  } else {
    unsigned words[4];
    for (int w = 0; w < 4; ++w) {
      if constexpr (std::is_same_v<T, __half>) *reinterpret_cast<__half2*>(&words[w]) = __floats2half2_rn(v[2 * w], v[2 * w + 1]);
      else *reinterpret_cast<__nv_bfloat162*>(&words[w]) = __floats2bfloat162_rn(v[2 * w], v[2 * w + 1]);
    }
    *reinterpret_cast<uint4*>(p + i) = make_uint4(words[0], words[1], words[2], words[3]);
  }
}
template <class T> inline bool aligned_wide(const T* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Calls f(T{}) with T the storage type of a float DType.
template <class F> void dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return;
    case DType::f16: f(__half{}); return;
    case DType::bf16: f(__nv_bfloat16{}); return;
    default: throw Error(std::string(op) + ": dtype must be fp32, fp16 or bf16");
  }
}

// The cuBLAS element type of a float DType.
inline cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: throw Error("GEMM dtype must be fp32, fp16 or bf16");
  }
}

inline unsigned grid_for(size_t n, unsigned block) {
  size_t g = (n + block - 1) / block;
  return static_cast<unsigned>(g > 65535u * 32u ? 65535u * 32u : g);  // grid-stride loops cover the rest
}

// Blocks of `threads` / 32 warps for `rows` rows of a warp each (the gate's row kernels).
inline unsigned blocks_of_warps(long long rows, int threads) {
  const long long per_block = threads / 32;
  return static_cast<unsigned>((rows + per_block - 1) / per_block);
}

}  // namespace moebench::cuda
