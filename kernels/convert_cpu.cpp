#include "kernels/convert.h"
#include <cmath>
#include <algorithm>
#include <cstring>

namespace moebench {

static float bits_to_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static uint32_t float_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

static float round_bf16(float v) {
  if (std::isnan(v)) return v;
  uint32_t u = float_to_bits(v);
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even on the dropped 16 bits
  return bits_to_float(u & 0xFFFF0000u);
}

// fp16: 10 mantissa bits, exponent range [-14, 15]; below 2^-14 the spacing is fixed at 2^-24.
static float round_f16(float v) {
  if (std::isnan(v) || std::isinf(v)) return v;
  const float a = std::fabs(v);
  if (a >= 65520.f) return std::copysign(INFINITY, v);
  int e;
  std::frexp(a, &e);                      // a = f * 2^e, f in [0.5, 1)
  const int exp = std::max(e - 1, -14);   // unbiased exponent of the leading bit
  const float ulp = std::ldexp(1.f, exp - 10);
  return std::copysign(std::nearbyint(a / ulp) * ulp, v);  // nearbyint rounds half to even
}

float round_to(DType t, float v) {
  switch (t) {
    case DType::f16: return round_f16(v);
    case DType::bf16: return round_bf16(v);
    default: return v;
  }
}

void round_to(DType t, float* v, std::size_t n) {
  if (t == DType::f32) return;
  for (std::size_t i = 0; i < n; ++i) v[i] = round_to(t, v[i]);
}

#if !MOEBENCH_WITH_CUDA
void convert_cuda(const void*, DType, void*, DType, std::size_t, void*) { cuda_not_built("convert"); }
#endif

}  // namespace moebench
