#include "kernels/cublas_library.h"
#include <dlfcn.h>
#include <atomic>
#include <string>
#include <vector>
#include "kernels/exec.h"

namespace moebench {

namespace {
std::atomic<bool> opened{false};

// cublas_v2.h defines cublasCreate as cublasCreate_v2 and so on: the symbol is the expansion.
#define MOEBENCH_EXPANDED_NAME(name) MOEBENCH_NAME_OF(name)
#define MOEBENCH_NAME_OF(name) #name

void* open_first(const std::vector<std::string>& candidates, std::string& tried) {
  for (const std::string& path : candidates) {
    if (void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* why = dlerror();
    tried += "\n  " + path + ": " + (why ? why : "not found");
  }
  return nullptr;
}

void* open_library(const char* build_path, const char* soname) {
  std::vector<std::string> candidates;
  if (*build_path) candidates.push_back(build_path);
  candidates.push_back(soname);
  std::string tried;
  void* lib = open_first(candidates, tried);
  if (!lib) throw Error(std::string("the CUDA backend needs ") + soname + ", which could not be opened:" + tried);
  return lib;
}

template <class Fn>
void resolve(void* lib, const char* library, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn) throw Error(std::string(library) + " has no entry point " + name + " (a cuBLAS older than the build's?)");
}

CublasLibrary open_cublas() {
  // cuBLASLt first: libcublas needs it, and finds this copy already open.
  void* lt = open_library(MOEBENCH_CUBLASLT_LIBRARY, "libcublasLt.so." MOEBENCH_CUDA_MAJOR);
  void* blas = open_library(MOEBENCH_CUBLAS_LIBRARY, "libcublas.so." MOEBENCH_CUDA_MAJOR);
  CublasLibrary c;
#define MOEBENCH_RESOLVE(lib, field, name) resolve(lib, #lib, c.field, MOEBENCH_EXPANDED_NAME(name))
  MOEBENCH_RESOLVE(blas, create, cublasCreate);
  MOEBENCH_RESOLVE(blas, destroy, cublasDestroy);
  MOEBENCH_RESOLVE(blas, set_stream, cublasSetStream);
  MOEBENCH_RESOLVE(blas, set_workspace, cublasSetWorkspace);
  MOEBENCH_RESOLVE(blas, gemm_ex, cublasGemmEx);
  MOEBENCH_RESOLVE(blas, gemm_grouped_batched_ex, cublasGemmGroupedBatchedEx);
  MOEBENCH_RESOLVE(blas, status_string, cublasGetStatusString);
  MOEBENCH_RESOLVE(lt, lt_create, cublasLtCreate);
  MOEBENCH_RESOLVE(lt, lt_destroy, cublasLtDestroy);
  MOEBENCH_RESOLVE(lt, lt_matmul, cublasLtMatmul);
  MOEBENCH_RESOLVE(lt, lt_matmul_algo_check, cublasLtMatmulAlgoCheck);
  MOEBENCH_RESOLVE(lt, lt_matmul_algo_get_heuristic, cublasLtMatmulAlgoGetHeuristic);
  MOEBENCH_RESOLVE(lt, lt_matmul_desc_create, cublasLtMatmulDescCreate);
  MOEBENCH_RESOLVE(lt, lt_matmul_desc_set_attribute, cublasLtMatmulDescSetAttribute);
  MOEBENCH_RESOLVE(lt, lt_matmul_preference_create, cublasLtMatmulPreferenceCreate);
  MOEBENCH_RESOLVE(lt, lt_matmul_preference_destroy, cublasLtMatmulPreferenceDestroy);
  MOEBENCH_RESOLVE(lt, lt_matmul_preference_set_attribute, cublasLtMatmulPreferenceSetAttribute);
  MOEBENCH_RESOLVE(lt, lt_matrix_layout_create, cublasLtMatrixLayoutCreate);
  MOEBENCH_RESOLVE(lt, lt_matrix_layout_set_attribute, cublasLtMatrixLayoutSetAttribute);
#undef MOEBENCH_RESOLVE
  opened = true;
  return c;
}
}  // namespace

const CublasLibrary& cublas() {
  // A failure is not cached by the static's initialisation: each call tries again and throws again.
  static const CublasLibrary library = open_cublas();
  return library;
}

bool cublas_opened() { return opened; }

}  // namespace moebench
