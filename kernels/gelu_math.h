// The GeLU formulas, shared by the CPU reference and the CUDA kernels so both compute one
// function. tanh is a rational minimax approximation on [-7.9, 7.9] (saturating outside),
// within a few fp32 ulps of tanh, written as plain arithmetic so the CPU loop vectorises
// (a libm tanhf call per element costs more than the expert GEMMs around it).
// The logistic form below is the same function for the GPU's 16-bit kernels.
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

// The same GeLU through the logistic function: 0.5 (1 + tanh u) = s = 1 / (1 + e) with
// e = exp(-2u) = 2^a, and 1 - tanh^2 u = 4 s (1 - s) with 1 - s = e s, so that no two
// near-equal numbers are subtracted: GeLU(x) = x s, GeLU'(x) = s + 2 x u' s (1 - s). With the
// GPU's exp2 and reciprocal instructions that is about a dozen operations an element where the
// rational tanh takes about forty, which kept the GPU's GeLU kernels compute-bound (ncu's
// summary, results/cuda/lease_2026-11-27_430541b/ncu_moe_layer.txt, has gelu_forward_kernel's
// SM throughput well above its DRAM's). On the device exp2 and the reciprocal are the hardware's
// approximations, a few fp32 ulps, used for 16-bit data, whose own rounding is far coarser; on
// the host they are exact, which is how the tests check the formula. a is clamped where tanh is
// +-1 in fp32.
constexpr float kLogisticLinear = float(-2 * 1.4426950408889634 * 0.7978845608028654);  // a = x (l + c x^2)
constexpr float kLogisticCubic = float(-2 * 1.4426950408889634 * 0.7978845608028654 * 0.044715);
constexpr float kLogisticClamp = 64.f;

MOEBENCH_HD float exp2_fast(float a) {
#if defined(__CUDA_ARCH__)
  return exp2f(a);
#else
  return std::exp2(a);
#endif
}

MOEBENCH_HD float reciprocal_fast(float d) {
#if defined(__CUDA_ARCH__)
  return __fdividef(1.f, d);
#else
  return 1.f / d;
#endif
}

struct Logistic {
  float s, rest;  // s = 0.5 (1 + tanh u) and 1 - s
};

MOEBENCH_HD Logistic logistic(float x) {
  float a = x * (kLogisticLinear + kLogisticCubic * x * x);
  a = a > kLogisticClamp ? kLogisticClamp : a;
  a = a < -kLogisticClamp ? -kLogisticClamp : a;
  const float e = exp2_fast(a);
  const float s = reciprocal_fast(1.f + e);
  return {s, e * s};
}

MOEBENCH_HD float forward_logistic(float x) { return x * logistic(x).s; }

MOEBENCH_HD float derivative_logistic(float x) {
  const Logistic l = logistic(x);
  const float du = kSqrt2OverPi * (1.f + 3.f * kCubic * x * x);
  return l.s + 2.f * x * du * l.s * l.rest;
}

}  // namespace moebench::gelu_math
