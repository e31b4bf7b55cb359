// Conversions between fp32 and the 16-bit float types: on the host (to round a reference's
// inputs exactly as the device stores them) and on the device (to fill typed buffers).
#pragma once
#include <cstddef>
#include <cstdint>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

// Round-to-nearest-even of an fp32 value to fp16 / bf16 and back.
float round_to(DType t, float v);
void round_to(DType t, float* v, std::size_t n);

// An fp16 / bf16 value as the 16 bits both backends store it in (IEEE binary16; bfloat16: the
// upper half of fp32), rounded to nearest even, and back.
std::uint16_t to_bits16(DType t, float v);
float from_bits16(DType t, std::uint16_t bits);

// dst[i] = (dst dtype) src[i]; both on the device. Float types only.
void convert_cpu(const void* src, DType src_t, void* dst, DType dst_t, std::size_t n);
void convert_cuda(const void* src, DType src_t, void* dst, DType dst_t, std::size_t n, void* stream);
void convert(const Exec& ex, const void* src, DType src_t, void* dst, DType dst_t, std::size_t n);

}  // namespace moebench
