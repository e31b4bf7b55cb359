#include "kernels/convert.h"
#include <cmath>
#include <algorithm>
#include <cstring>
#include <string>

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

std::uint16_t to_bits16(DType t, float v) {
  if (t == DType::bf16) {
    if (std::isnan(v)) return 0x7FC0;
    return std::uint16_t(float_to_bits(round_bf16(v)) >> 16);
  }
  if (t != DType::f16) throw Error("to_bits16: " + std::string(dtype_name(t)) + " is not a 16-bit float type");
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return 0x7E00;
  const float r = std::fabs(round_f16(v));  // exactly representable from here on
  if (std::isinf(r)) return sign | 0x7C00;
  if (r < std::ldexp(1.f, -14)) return sign | std::uint16_t(r / std::ldexp(1.f, -24));  // subnormal (or zero)
  int e;
  std::frexp(r, &e);  // r = f 2^e, f in [0.5, 1)
  const int exp = e - 1;
  const auto mantissa = std::uint16_t((std::ldexp(r, -exp) - 1.f) * 1024.f);
  return sign | std::uint16_t((exp + 15) << 10) | mantissa;
}

float from_bits16(DType t, std::uint16_t b) {
  if (t == DType::bf16) return bits_to_float(std::uint32_t(b) << 16);
  if (t != DType::f16) throw Error("from_bits16: " + std::string(dtype_name(t)) + " is not a 16-bit float type");
  const float sign = (b & 0x8000) ? -1.f : 1.f;
  const int exp = (b >> 10) & 0x1F, mantissa = b & 0x3FF;
  if (exp == 0x1F) return mantissa ? NAN : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(float(mantissa), -24);
  return sign * std::ldexp(1.f + float(mantissa) / 1024.f, exp - 15);
}

void convert_cpu(const void* src, DType src_t, void* dst, DType dst_t, std::size_t n) {
  if (!is_float(src_t) || !is_float(dst_t))
    throw Error("convert: " + std::string(dtype_name(src_t)) + " to " + std::string(dtype_name(dst_t)) +
                "; allowed: fp32, fp16 and bf16");
  auto read = [&](std::size_t i) {
    return src_t == DType::f32 ? static_cast<const float*>(src)[i]
                               : from_bits16(src_t, static_cast<const std::uint16_t*>(src)[i]);
  };
  for (std::size_t i = 0; i < n; ++i) {
    const float v = read(i);
    if (dst_t == DType::f32)
      static_cast<float*>(dst)[i] = v;
    else
      static_cast<std::uint16_t*>(dst)[i] = to_bits16(dst_t, v);
  }
}

void convert(const Exec& ex, const void* src, DType src_t, void* dst, DType dst_t, std::size_t n) {
  if (ex.backend == Backend::cuda) return convert_cuda(src, src_t, dst, dst_t, n, ex.stream);
  run_host(ex, "convert", [=] { convert_cpu(src, src_t, dst, dst_t, n); });
}

#if !MOEBENCH_WITH_CUDA
void convert_cuda(const void*, DType, void*, DType, std::size_t, void*) { cuda_not_built("convert"); }
#endif

}  // namespace moebench
