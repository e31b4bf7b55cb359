// Where an op runs: the backend and, on CUDA, the stream and cuBLAS handle.
// Handles are opaque pointers so that CPU-only code never includes CUDA headers.
#pragma once
#include <stdexcept>
#include <string>

namespace moebench {

enum class Backend { cpu, cuda };

inline const char* backend_name(Backend b) { return b == Backend::cpu ? "cpu" : "cuda"; }

struct Exec {
  Backend backend = Backend::cpu;
  void* stream = nullptr;     // cudaStream_t
  void* blas = nullptr;       // cublasHandle_t
  bool tensor_cores = true;   // GEMMs may use tensor cores (TF32 for fp32 inputs)
};

// Raised for invalid arguments and library failures inside one process; a bench's main
// turns it into an error line and ends the whole MPI job.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#if MOEBENCH_WITH_CUDA
inline constexpr bool kCudaBuilt = true;
#else
inline constexpr bool kCudaBuilt = false;
#endif

[[noreturn]] inline void cuda_not_built(const char* op) {
  throw Error(std::string(op) + ": this build has no CUDA backend (configure with the CUDA toolkit, MOEBENCH_CUDA=AUTO or ON)");
}

}  // namespace moebench
