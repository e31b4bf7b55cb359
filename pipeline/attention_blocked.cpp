// Blocked causal attention: the scores of a panel of query rows at a time (every head at once),
// each panel only as wide as the keys its rows see, with each row's log-sum-exp kept in place of
// the probabilities. The backward recomputes the panels from those statistics in two passes so
// that every gradient comes out of one GEMM, none accumulated across panels:
//   over panels of keys [c0, c0 + cb), against the query rows from c0 on:  dV = P^T dC, dK = dS^T Q
//   over panels of query rows [r0, r0 + rb), against the keys 0 .. r0 + rb:  dQ = dS K
// with dS = P (dP - D) / sqrt(d), dP = dC V^T and D = rowsum(dC o C) (kernels/attention_panels.h).
#include <algorithm>
#include <cmath>
#include "kernels/attention_panels.h"
#include "kernels/batched_gemm.h"
#include "pipeline/attention.h"
#include "pipeline/head_gemms.h"

namespace moebench {

using head_gemms::at;
using head_gemms::strided;
using head_gemms::View;

void CausalSelfAttention::blocked_forward(AttentionContext& c, const Stream& s) {
  const int d = cfg_.head_dim, in = inner(), W = qkv_width(), seq = c.seq, heads = cfg_.heads;
  const int panel_rows = std::min(cfg_.panel_rows, seq);
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t);
  const Exec ex = dev_.exec(s);
  const float scale = 1.f / std::sqrt(float(d));
  c.stats = alloc_.allocate(std::size_t(c.sequences) * heads * seq * sizeof(float), MemTag::activations, s);
  Buffer panel = alloc_.allocate(std::size_t(heads) * panel_rows * seq * es, MemTag::temporary, s);
  for (int b = 0; b < c.sequences; ++b) {
    const std::size_t row0 = std::size_t(b) * seq;
    float* stats = static_cast<float*>(c.stats.data()) + std::size_t(b) * heads * seq;
    const View k{at(c.qkv.data(), row0 * W + in, es), W}, v{at(c.qkv.data(), row0 * W + 2 * in, es), W};
    for (int r0 = 0; r0 < seq; r0 += panel_rows) {
      const int rows = std::min(panel_rows, seq - r0), cols = r0 + rows;  // the keys these rows see
      const long long area = (long long)rows * cols;
      const View q{at(c.qkv.data(), (row0 + r0) * W, es), W};
      batched_gemm(ex, strided_batch(strided(t, false, true, rows, cols, d, q, k, panel.data(), cols), heads, d, d, area));
      attention_panel_softmax_forward(ex, {heads, rows, cols, r0, 0, seq, scale}, panel.data(), stats, t);
      batched_gemm(ex, strided_batch(strided(t, false, false, rows, d, cols, {panel.data(), cols}, v,
                                             at(c.ctx.data(), (row0 + r0) * in, es), in),
                                     heads, area, d, d));
    }
  }
}

void CausalSelfAttention::blocked_backward(AttentionContext& c, const void* dctx, void* dqkv, const Stream& s) {
  const int d = cfg_.head_dim, in = inner(), W = qkv_width(), seq = c.seq, heads = cfg_.heads;
  const int panel_rows = std::min(cfg_.panel_rows, seq);
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t);
  const Exec ex = dev_.exec(s);
  const float scale = 1.f / std::sqrt(float(d));
  Buffer delta = alloc_.allocate(std::size_t(c.sequences) * heads * seq * sizeof(float), MemTag::temporary, s);
  attention_row_dot(ex, c.sequences, seq, heads, d, in, dctx, c.ctx.data(), static_cast<float*>(delta.data()), t);
  // Scores then probabilities, and their gradients, of one panel: at most panel_rows x seq per head.
  Buffer probs = alloc_.allocate(std::size_t(heads) * panel_rows * seq * es, MemTag::temporary, s);
  Buffer grads = alloc_.allocate(std::size_t(heads) * panel_rows * seq * es, MemTag::temporary, s);
  auto over_heads = [&](const GemmArgs& head0, long long stride_a, long long stride_b, long long stride_c) {
    batched_gemm(ex, strided_batch(head0, heads, stride_a, stride_b, stride_c));
  };
  for (int b = 0; b < c.sequences; ++b) {
    const std::size_t row0 = std::size_t(b) * seq;
    const float* stats = static_cast<const float*>(c.stats.data()) + std::size_t(b) * heads * seq;
    const float* dots = static_cast<const float*>(delta.data()) + std::size_t(b) * heads * seq;
    // Row r of Q, K, V, dC and of dQ, dK, dV.
    auto q = [&](int r) { return View{at(c.qkv.data(), (row0 + r) * W, es), W}; };
    auto k = [&](int r) { return View{at(c.qkv.data(), (row0 + r) * W + in, es), W}; };
    auto v = [&](int r) { return View{at(c.qkv.data(), (row0 + r) * W + 2 * in, es), W}; };
    auto dc = [&](int r) { return View{at(dctx, (row0 + r) * in, es), in}; };
    auto grad = [&](int r, int which) { return at(dqkv, (row0 + r) * W + which * in, es); };
    for (int c0 = 0; c0 < seq; c0 += panel_rows) {
      const int cols = std::min(panel_rows, seq - c0), rows = seq - c0;  // the rows that see these keys
      const long long area = (long long)rows * cols;
      over_heads(strided(t, false, true, rows, cols, d, q(c0), k(c0), probs.data(), cols), d, d, area);   // S
      over_heads(strided(t, false, true, rows, cols, d, dc(c0), v(c0), grads.data(), cols), d, d, area);  // dP
      attention_panel_softmax_backward(ex, {heads, rows, cols, c0, c0, seq, scale}, probs.data(), grads.data(), stats, dots, t);
      over_heads(strided(t, true, false, cols, d, rows, {probs.data(), cols}, dc(c0), grad(c0, 2), W), area, d, d);  // dV
      over_heads(strided(t, true, false, cols, d, rows, {grads.data(), cols}, q(c0), grad(c0, 1), W), area, d, d);   // dK
    }
    for (int r0 = 0; r0 < seq; r0 += panel_rows) {
      const int rows = std::min(panel_rows, seq - r0), cols = r0 + rows;  // the keys these rows see
      const long long area = (long long)rows * cols;
      over_heads(strided(t, false, true, rows, cols, d, q(r0), k(0), probs.data(), cols), d, d, area);   // S
      over_heads(strided(t, false, true, rows, cols, d, dc(r0), v(0), grads.data(), cols), d, d, area);  // dP
      attention_panel_softmax_backward(ex, {heads, rows, cols, r0, 0, seq, scale}, probs.data(), grads.data(), stats, dots, t);
      over_heads(strided(t, false, false, rows, d, cols, {grads.data(), cols}, k(0), grad(r0, 0), W), area, d, d);  // dQ
    }
  }
}

}  // namespace moebench
