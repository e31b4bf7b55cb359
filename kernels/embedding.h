// Token and position embeddings of a decoder's input, and their gradients:
//   y[r] = table[tokens[r]] + positions[r mod seq]          (rows are sequences of seq tokens)
//   dtable[tokens[r]] += dy[r];  dpositions[r mod seq] += dy[r]
// All fp32. CUDA: one block per row; the backward adds with atomics (tokens repeat).
#pragma once
#include <cstddef>
#include <cstdint>
#include "kernels/exec.h"

namespace moebench {

struct EmbeddingShape {
  int rows = 0, seq = 0, hidden = 0, vocab = 0;
};

void embedding_forward_cpu(const EmbeddingShape& s, const std::int32_t* tokens, const float* table, const float* positions,
                           float* y);
void embedding_backward_cpu(const EmbeddingShape& s, const std::int32_t* tokens, const float* dy, float* dtable,
                            float* dpositions);
void embedding_forward_cuda(const EmbeddingShape& s, const std::int32_t* tokens, const float* table, const float* positions,
                            float* y, void* stream);
void embedding_backward_cuda(const EmbeddingShape& s, const std::int32_t* tokens, const float* dy, float* dtable,
                             float* dpositions, void* stream);

void embedding_forward(const Exec& ex, const EmbeddingShape& s, const std::int32_t* tokens, const float* table,
                       const float* positions, float* y);
void embedding_backward(const Exec& ex, const EmbeddingShape& s, const std::int32_t* tokens, const float* dy, float* dtable,
                        float* dpositions);

}  // namespace moebench
