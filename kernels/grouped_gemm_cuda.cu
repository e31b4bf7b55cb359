#include <vector>
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_types.cuh"
#include "kernels/grouped_gemm.h"

namespace moebench {

// Each problem is a group of one; row-major operands are swapped as in gemm_cuda.
void grouped_gemm_cuda(const std::vector<GemmArgs>& problems, void* stream, void* blas, bool tensor_cores,
                       void* device_pointers, std::size_t device_pointer_bytes) {
  auto handle = static_cast<cublasHandle_t>(blas);
  auto s = static_cast<cudaStream_t>(stream);
  std::vector<cublasOperation_t> ta, tb;
  std::vector<int> m, n, k, lda, ldb, ldc, size;
  std::vector<float> alpha, beta;
  std::vector<const void*> a_ptr, b_ptr;
  std::vector<void*> c_ptr;
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
  // Pageable host memory: each copy has finished reading its source when it returns.
  MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(d_a, a_ptr.data(), count * sizeof(void*), cudaMemcpyHostToDevice, s));
  MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(d_b, b_ptr.data(), count * sizeof(void*), cudaMemcpyHostToDevice, s));
  MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(d_c, c_ptr.data(), count * sizeof(void*), cudaMemcpyHostToDevice, s));
  MOEBENCH_CUBLAS_CHECK(cublasSetStream(handle, s));
  const cublasComputeType_t compute =
      dtype == DType::f32 ? (tensor_cores ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F) : CUBLAS_COMPUTE_32F;
  const cudaDataType_t t = cuda::data_type(dtype);
  MOEBENCH_CUBLAS_CHECK(cublasGemmGroupedBatchedEx(handle, ta.data(), tb.data(), m.data(), n.data(), k.data(),
                                                   alpha.data(), d_a, t, lda.data(), d_b, t, ldb.data(), beta.data(),
                                                   d_c, t, ldc.data(), count, size.data(), compute));
}

}  // namespace moebench
