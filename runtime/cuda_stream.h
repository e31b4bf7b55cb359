// The cudaStream_t behind a runtime Stream or a stream's handle, for the files that call CUDA.
#pragma once
#include <cuda_runtime.h>
#include "runtime/stream.h"

namespace moebench {
inline cudaStream_t cuda_stream(void* handle) { return static_cast<cudaStream_t>(handle); }
inline cudaStream_t cuda_stream(const Stream& s) { return cuda_stream(s.handle); }
}  // namespace moebench
