// The GeLU formulas, shared by the CPU reference and the CUDA kernels so both compute one function.
#pragma once
#include <cmath>

#if defined(__CUDACC__)
#define MOEBENCH_HD __host__ __device__ __forceinline__
#else
#define MOEBENCH_HD inline
#endif

namespace moebench::gelu_math {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

MOEBENCH_HD float forward(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 0.5f * x * (1.f + tanhf(u));
}

MOEBENCH_HD float derivative(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  const float t = tanhf(u);
  const float du = kSqrt2OverPi * (1.f + 3.f * kCubic * x * x);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * du;
}

}  // namespace moebench::gelu_math
