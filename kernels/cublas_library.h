// cuBLAS and cuBLASLt, opened with dlopen when the first CUDA device opens, never linked: linked,
// their initialisers run at every process start and fault in much of cuBLASLt's data, which a run
// on the CPU backend (a test, a rank on a laptop) would pay for nothing.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

namespace moebench {

// The entry points the suite calls, by cuBLAS's names less the prefix (cublas_v2.h's macros map
// create to cublasCreate_v2, and so on).
struct CublasLibrary {
  decltype(&::cublasCreate) create = nullptr;
  decltype(&::cublasDestroy) destroy = nullptr;
  decltype(&::cublasSetStream) set_stream = nullptr;
  decltype(&::cublasSetWorkspace) set_workspace = nullptr;
  // The compute-type form (cublas_api.h overloads it with a cudaDataType one for C++).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&::cublasGemmGroupedBatchedEx) gemm_grouped_batched_ex = nullptr;
  decltype(&::cublasGetStatusString) status_string = nullptr;
  decltype(&::cublasLtCreate) lt_create = nullptr;
  decltype(&::cublasLtDestroy) lt_destroy = nullptr;
  decltype(&::cublasLtMatmul) lt_matmul = nullptr;
  decltype(&::cublasLtMatmulAlgoCheck) lt_matmul_algo_check = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) lt_matmul_algo_get_heuristic = nullptr;
  decltype(&::cublasLtMatmulDescCreate) lt_matmul_desc_create = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) lt_matmul_desc_set_attribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) lt_matmul_preference_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) lt_matmul_preference_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) lt_matmul_preference_set_attribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) lt_matrix_layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) lt_matrix_layout_set_attribute = nullptr;
};

// Opens both libraries at the first call (once per process, thread-safe): the build's toolkit's
// files first, then their sonames on the loader's search path. Throws Error naming the library
// and the entry point it could not find, at every call after such a failure too.
const CublasLibrary& cublas();

// Whether this process has opened them.
bool cublas_opened();

}  // namespace moebench
