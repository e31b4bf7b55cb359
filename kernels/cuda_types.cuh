// Loads and stores between fp32 registers and fp32/fp16/bf16 memory, and the switch from a
// runtime DType to a templated launch.
#pragma once
#include <cuda_bf16.h>
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

}  // namespace moebench::cuda
