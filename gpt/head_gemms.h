// The attention's per-head GEMMs: operands as (pointer, leading dimension) views, and Q, K, V
// (and their gradients) in the head-major layout kernels/swap_dims.h makes, where one strided
// batch covers every (head, sequence) block. Shared by the materialized and the blocked attention.
#pragma once
#include <cstddef>
#include "kernels/gemm.h"

namespace moebench::head_gemms {

// A row-major operand at `p` with leading dimension `ld`.
struct View {
  const void* p;
  int ld;
};

inline GemmArgs strided(DType t, bool ta, bool tb, int m, int n, int k, View a, View b, void* c, int ldc) {
  GemmArgs g;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = 1.f;
  g.beta = 0.f;
  g.a = a.p;
  g.lda = a.ld;
  g.b = b.p;
  g.ldb = b.ld;
  g.c = c;
  g.ldc = ldc;
  g.dtype = t;
  return g;
}

// Element i of a buffer of es-byte elements.
inline void* at(void* p, std::size_t i, std::size_t es) { return static_cast<char*>(p) + i * es; }
inline const void* at(const void* p, std::size_t i, std::size_t es) { return static_cast<const char*>(p) + i * es; }

// One of Q, K, V (or a gradient of one) as [heads x sequences, seq, d] blocks: block
// i = h sequences + b is head h of sequence b, seq d elements after block i - 1; the next of Q, K,
// V starts `span` = heads x tokens x d elements on.
struct HeadBlocks {
  const void* base;
  long long span;
  int d;
  std::size_t es;
  // Row r of block 0 (every block's row r, with the batch stride seq d).
  View at(int r) const { return {head_gemms::at(base, std::size_t(r) * d, es), d}; }
  void* out(int r) const { return const_cast<void*>(head_gemms::at(base, std::size_t(r) * d, es)); }
  HeadBlocks next() const { return {head_gemms::at(base, std::size_t(span), es), span, d, es}; }
};

// Of a head-major buffer of `heads` heads over `tokens` tokens: Q (which 0), K (1) or V (2).
inline HeadBlocks head_blocks(const void* base, int heads, int tokens, int d, std::size_t es, int which = 0) {
  const long long span = (long long)heads * tokens * d;
  return {head_gemms::at(base, std::size_t(which) * span, es), span, d, es};
}

}  // namespace moebench::head_gemms
