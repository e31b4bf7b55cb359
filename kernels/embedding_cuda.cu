#include <cmath>
#include "kernels/cuda_check.cuh"
#include "kernels/embedding.h"

namespace moebench {

namespace {
// One block per row. A token outside the vocabulary writes NaN (the host cannot be told here;
// the CPU reference throws) and adds nothing to the table's gradient.
__global__ void embedding_forward_kernel(int seq, int hidden, int vocab, const int32_t* tokens, const float* table,
                                         const float* positions, float* y) {
  const int t = tokens[blockIdx.x];
  const bool valid = t >= 0 && t < vocab;
  const size_t out = size_t(blockIdx.x) * hidden, pos = size_t(blockIdx.x % unsigned(seq)) * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x)
    y[out + c] = valid ? table[size_t(t) * hidden + c] + positions[pos + c] : NAN;
}

__global__ void embedding_backward_kernel(int seq, int hidden, int vocab, const int32_t* tokens, const float* dy,
                                          float* dtable, float* dpositions) {
  const int t = tokens[blockIdx.x];
  const size_t in = size_t(blockIdx.x) * hidden, pos = size_t(blockIdx.x % unsigned(seq)) * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    const float g = dy[in + c];
    if (t >= 0 && t < vocab) atomicAdd(dtable + size_t(t) * hidden + c, g);
    atomicAdd(dpositions + pos + c, g);
  }
}
}  // namespace

void embedding_forward_cuda(const EmbeddingShape& s, const std::int32_t* tokens, const float* table, const float* positions,
                            float* y, void* stream) {
  if (s.rows == 0) return;
  embedding_forward_kernel<<<s.rows, 256, 0, static_cast<cudaStream_t>(stream)>>>(s.seq, s.hidden, s.vocab, tokens, table,
                                                                                  positions, y);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

void embedding_backward_cuda(const EmbeddingShape& s, const std::int32_t* tokens, const float* dy, float* dtable,
                             float* dpositions, void* stream) {
  if (s.rows == 0) return;
  embedding_backward_kernel<<<s.rows, 256, 0, static_cast<cudaStream_t>(stream)>>>(s.seq, s.hidden, s.vocab, tokens, dy,
                                                                                   dtable, dpositions);
  MOEBENCH_CUDA_LAUNCH_CHECK();
}

}  // namespace moebench
