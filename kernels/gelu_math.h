// The GeLU formulas, shared by the CPU reference and the CUDA kernels so both compute one
// function. tanh is a rational minimax approximation on [-7.9, 7.9] (saturating outside),
// within a few fp32 ulps of tanh, written as plain arithmetic so the CPU loop vectorises
// (a libm tanhf call per element costs more than the expert GEMMs around it).
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

MOEBENCH_HD float tanh_approx(float x) {
  const float clamp = 7.90531110763549805f;
  x = x > clamp ? clamp : x;  // two plain selects: they vectorise where a nested one does not
  x = x < -clamp ? -clamp : x;
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return p / q;
}

MOEBENCH_HD float forward(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 0.5f * x * (1.f + tanh_approx(u));
}

MOEBENCH_HD float derivative(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  const float t = tanh_approx(u);
  const float du = kSqrt2OverPi * (1.f + 3.f * kCubic * x * x);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * du;
}

}  // namespace moebench::gelu_math
