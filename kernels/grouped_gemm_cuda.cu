#include <algorithm>
#include <cstdint>
#include <vector>
#include "kernels/cublas_check.h"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/grouped_gemm.h"

namespace moebench {

// The per-problem pointer arrays reach the device as kernel parameters (copied at launch), so
// no host array has to outlive the call and no pageable copy sits inside a timed step.
// 480 pointers = 3840 bytes keeps within the classic 4 KiB parameter limit of every toolkit.
constexpr int kPointersPerLaunch = 480;
struct PointerBatch {
  const void* p[kPointersPerLaunch];
  int count;
};

__global__ void write_pointers_kernel(PointerBatch batch, const void** out) {
  const int i = threadIdx.x;
  if (i < batch.count) out[i] = batch.p[i];
}

static void upload_pointers(const std::vector<const void*>& pointers, void** device, cudaStream_t s) {
  for (std::size_t first = 0; first < pointers.size(); first += kPointersPerLaunch) {
    PointerBatch batch{};
    batch.count = int(std::min<std::size_t>(kPointersPerLaunch, pointers.size() - first));
    for (int i = 0; i < batch.count; ++i) batch.p[i] = pointers[first + i];
    write_pointers_kernel<<<1, kPointersPerLaunch, 0, s>>>(batch, const_cast<const void**>(device) + first);
    MOEBENCH_CUDA_LAUNCH_CHECK();
  }
}

// 16-bit operands: cuBLAS's grouped GEMM needs every matrix pointer 16-byte aligned.
static void check_aligned(const void* p, DType t, const char* which) {
  if (dtype_size(t) == 2 && reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
    throw Error(std::string("grouped_gemm: ") + which + " pointer is not 16-byte aligned, which cuBLAS's grouped GEMM needs for " +
                std::string(dtype_name(t)) + " (rows of a width that is not a multiple of 8?)");
}

// Each problem is a group of one; row-major operands are swapped as in gemm_cuda.
void grouped_gemm_cuda(const std::vector<GemmArgs>& problems, void* stream, void* blas, bool tensor_cores,
                       void* device_pointers, std::size_t device_pointer_bytes) {
  auto handle = static_cast<cublasHandle_t>(blas);
  auto s = static_cast<cudaStream_t>(stream);
  std::vector<cublasOperation_t> ta, tb;
  std::vector<int> m, n, k, lda, ldb, ldc, size;
  std::vector<float> alpha, beta;
  std::vector<const void*> a_ptr, b_ptr, c_ptr;
  DType dtype = problems.empty() ? DType::f32 : problems[0].dtype;
  for (const GemmArgs& g : problems) {
    if (g.dtype != dtype) throw Error("grouped_gemm: every problem must have the same dtype");
    if (g.m == 0 || g.n == 0) continue;
    if (g.k == 0) {  // C = beta * C
      if (g.beta == 0.f)
        MOEBENCH_CUDA_CHECK(cudaMemset2DAsync(g.c, size_t(g.ldc) * dtype_size(dtype), 0, size_t(g.n) * dtype_size(dtype),
                                              g.m, s));
      else if (g.beta != 1.f)
        throw Error("grouped_gemm: k = 0 supports beta 0 or 1");
      continue;
    }
    ta.push_back(g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
    tb.push_back(g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
    m.push_back(g.n); n.push_back(g.m); k.push_back(g.k);
    lda.push_back(g.ldb); ldb.push_back(g.lda); ldc.push_back(g.ldc);
    alpha.push_back(g.alpha); beta.push_back(g.beta);
    check_aligned(g.a, dtype, "A");
    check_aligned(g.b, dtype, "B");
    check_aligned(g.c, dtype, "C");
    a_ptr.push_back(g.b); b_ptr.push_back(g.a); c_ptr.push_back(g.c);
    size.push_back(1);
  }
  const int count = static_cast<int>(size.size());
  if (count == 0) return;
  if (grouped_gemm_workspace_bytes(count) > device_pointer_bytes)
    throw Error("grouped_gemm: pointer workspace too small for " + std::to_string(count) + " problems");
  void** base = static_cast<void**>(device_pointers);
  const void** d_a = const_cast<const void**>(base);
  const void** d_b = const_cast<const void**>(base + count);
  void** d_c = base + 2 * count;
  std::vector<const void*> all(a_ptr);  // [A pointers][B pointers][C pointers], as base is laid out
  all.insert(all.end(), b_ptr.begin(), b_ptr.end());
  all.insert(all.end(), c_ptr.begin(), c_ptr.end());
  upload_pointers(all, base, s);
  const cublasComputeType_t compute =  // the grouped call takes no pedantic type
      dtype == DType::f32 ? (tensor_cores ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F) : CUBLAS_COMPUTE_32F;
  const cudaDataType_t t = cuda::data_type(dtype);
  MOEBENCH_CUBLAS_CHECK(cublas().gemm_grouped_batched_ex(handle, ta.data(), tb.data(), m.data(), n.data(), k.data(),
                                                   alpha.data(), d_a, t, lda.data(), d_b, t, ldb.data(), beta.data(),
                                                   d_c, t, ldc.data(), count, size.data(), compute));
}

}  // namespace moebench
