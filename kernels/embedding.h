// Token and position embeddings of a decoder's input, and their gradients:
//   y[r] = table[tokens[r]] + positions[r mod seq]          (rows are sequences of seq tokens)
//   dtable[tokens[r]] += dy[r];  dpositions[r mod seq] += dy[r]
// Tables, rows and gradients in fp32, fp16 or bf16 (arithmetic in fp32). CUDA: one block per row;
// the backward adds with atomics (tokens repeat; 16-bit ones by compare-and-swap).
#pragma once
#include <cstddef>
#include <cstdint>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

struct EmbeddingShape {
  int rows = 0, seq = 0, hidden = 0, vocab = 0;
};

void embedding_forward_cpu(const EmbeddingShape& s, const std::int32_t* tokens, const float* table, const float* positions,
                           float* y);
void embedding_backward_cpu(const EmbeddingShape& s, const std::int32_t* tokens, const float* dy, float* dtable,
                            float* dpositions);
void embedding_forward_cuda(const EmbeddingShape& s, const std::int32_t* tokens, const void* table, const void* positions,
                            void* y, DType t, void* stream);
void embedding_backward_cuda(const EmbeddingShape& s, const std::int32_t* tokens, const void* dy, void* dtable,
                             void* dpositions, DType t, void* stream);

void embedding_forward(const Exec& ex, const EmbeddingShape& s, const std::int32_t* tokens, const void* table,
                       const void* positions, void* y, DType t = DType::f32);
void embedding_backward(const Exec& ex, const EmbeddingShape& s, const std::int32_t* tokens, const void* dy, void* dtable,
                        void* dpositions, DType t = DType::f32);

}  // namespace moebench
