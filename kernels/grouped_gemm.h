// Many independent GEMMs (one per local expert). serial: one GEMM call after another.
// grouped: one cublasGemmGroupedBatchedEx call on the GPU (per-problem sizes on the host,
// device arrays of matrix pointers in `device_pointers`); OpenBLAS has no grouped GEMM, so
// on the CPU grouped runs the same calls as serial.
// Problems with m = 0 or n = 0 are skipped; k = 0 gives C = beta * C (beta 0 or 1).
#pragma once
#include <vector>
#include "kernels/expert_gemm_routes.h"
#include "kernels/gemm.h"

namespace moebench {

// `mode`: serial or grouped (expert_gemm_routes.h); the other routes are the layer's.

// Bytes of device pointer arrays grouped_gemm needs for `problems` problems.
inline std::size_t grouped_gemm_workspace_bytes(std::size_t problems) { return 3 * problems * sizeof(void*); }

void grouped_gemm(const Exec& ex, const std::vector<GemmArgs>& problems, ExpertGemm mode, void* device_pointers,
                  std::size_t device_pointer_bytes);
void grouped_gemm_cuda(const std::vector<GemmArgs>& problems, void* stream, void* blas, bool tensor_cores,
                       void* device_pointers, std::size_t device_pointer_bytes);

}  // namespace moebench
