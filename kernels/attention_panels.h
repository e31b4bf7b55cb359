// The row ops of blocked causal attention (gpt/attention_blocked.cpp), which computes the
// scores a panel of rows at a time and keeps per-row softmax statistics instead of the
// [seq, seq] probabilities.
//
// A panel holds the scores of `rows` consecutive query rows (global rows row0 .. row0 + rows - 1
// of their sequence) against `cols` consecutive keys (global col0 .. col0 + cols - 1): one
// [rows, cols] row-major matrix per head, rows * cols elements apart. Row i sees key j when
// col0 + j <= row0 + i. Statistics and row dots are fp32, seq per panel matrix (one matrix per
// head of every sequence in the attention: [heads, sequences, seq]).
//   forward:  L = max + log(sum exp(scale s - max)),  p = exp(scale s - L)   (the panel must
//             hold every key its rows see: col0 = 0, cols >= row0 + rows)
//   backward: p = exp(scale s - L),  ds = scale p (dp - D),  D = rowsum(dO o O)   (any panel)
// Masked entries get p = ds = 0. Panels in fp32/fp16/bf16, arithmetic in fp32.
#pragma once
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

struct AttentionPanel {
  int heads = 0, rows = 0, cols = 0;
  int row0 = 0, col0 = 0;  // global row and key of the panel's first
  int seq = 0;             // the sequence's length: the statistics' stride per head
  float scale = 1.f;       // 1 / sqrt(head dim)
};

void attention_panel_softmax_forward_cpu(const AttentionPanel& p, float* scores, float* stats);
void attention_panel_softmax_backward_cpu(const AttentionPanel& p, float* scores, float* dprobs, const float* stats,
                                          const float* delta);
void attention_row_dot_cpu(int sequences, int seq, int heads, int head_dim, int ld, const float* dout, const float* out,
                           float* delta);
void attention_panel_softmax_forward_cuda(const AttentionPanel& p, void* scores, float* stats, DType t, void* stream);
void attention_panel_softmax_backward_cuda(const AttentionPanel& p, void* scores, void* dprobs, const float* stats,
                                           const float* delta, DType t, void* stream);
void attention_row_dot_cuda(int sequences, int seq, int heads, int head_dim, int ld, const void* dout, const void* out,
                            float* delta, DType t, void* stream);

// scores: s in, p out. stats: [heads, seq], `heads` being the panel's matrices (rows row0.. written).
void attention_panel_softmax_forward(const Exec& ex, const AttentionPanel& p, void* scores, float* stats, DType t);
// scores: s in, p out; dprobs: dp in, ds out. stats and delta: [heads, seq] (the panel's matrices).
void attention_panel_softmax_backward(const Exec& ex, const AttentionPanel& p, void* scores, void* dprobs,
                                      const float* stats, const float* delta, DType t);
// delta[(h sequences + b) seq + i] = sum over c < head_dim of dout and out at row b seq + i,
// column h head_dim + c (rows `ld` elements apart), for `sequences` sequences: fp32
// [heads, sequences, seq], the statistics' layout.
void attention_row_dot(const Exec& ex, int sequences, int seq, int heads, int head_dim, int ld, const void* dout,
                       const void* out, float* delta, DType t);

}  // namespace moebench
