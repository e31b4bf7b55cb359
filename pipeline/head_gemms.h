// The attention's per-head GEMMs read Q, K, V and write their products in place inside wider
// rows (the QKV rows, the context rows, the score panels): operands as (pointer, leading
// dimension) views, shared by the materialized and the blocked attention.
#pragma once
#include <cstddef>
#include "kernels/gemm.h"

namespace moebench::head_gemms {

// A row-major operand at `p` with leading dimension `ld`.
struct View {
  const void* p;
  int ld;
};

inline GemmArgs strided(DType t, bool ta, bool tb, int m, int n, int k, View a, View b, void* c, int ldc,
                        float beta = 0.f) {
  GemmArgs g;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = 1.f;
  g.beta = beta;
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

}  // namespace moebench::head_gemms
