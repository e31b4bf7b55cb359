// The bf16 parts of an fp32 value on the device, as split_bf16_cpu computes them (kernels/bf16_split.h).
#pragma once
#include <cuda_bf16.h>

namespace moebench::cuda {

struct Bf16Triple {
  __nv_bfloat16 hi, lo, lo2;
};

__device__ __forceinline__ Bf16Triple bf16_parts(float w) {
  Bf16Triple p;
  p.hi = __float2bfloat16_rn(w);
  const float rest = w - __bfloat162float(p.hi);  // exact, as on the host
  p.lo = __float2bfloat16_rn(rest);
  p.lo2 = __float2bfloat16_rn(rest - __bfloat162float(p.lo));
  return p;
}

// Part `which` (0 hi, 1 lo, 2 lo2) by select: indexing an array by it would put the parts on the stack.
__device__ __forceinline__ __nv_bfloat16 bf16_part(const Bf16Triple& p, int which) {
  return which == 0 ? p.hi : which == 1 ? p.lo : p.lo2;
}

}  // namespace moebench::cuda
