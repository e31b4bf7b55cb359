// Element types every op and communicator understands.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace moebench {

enum class DType { f32, f16, bf16, i32, i64 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
  }
  return "?";
}

inline std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64})
    if (dtype_name(t) == s) return t;
  return std::nullopt;
}

constexpr bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// Unit roundoff: tolerances in GPU-vs-CPU comparisons scale with it.
constexpr double dtype_epsilon(DType t) {
  switch (t) {
    case DType::f32: return 1.1920929e-07;
    case DType::f16: return 9.765625e-04;
    case DType::bf16: return 7.8125e-03;
    default: return 0.0;
  }
}

}  // namespace moebench
