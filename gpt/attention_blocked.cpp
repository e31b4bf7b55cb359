// Blocked causal attention: the scores of a panel of query rows at a time (every head of every
// sequence in one strided batch, head-major), each panel only as wide as the keys its rows see,
// with each row's log-sum-exp kept in place of the probabilities. The backward recomputes the
// panels from those statistics in two passes so that every gradient comes out of one GEMM, none
// accumulated across panels:
//   over panels of keys [c0, c0 + cb), against the query rows from c0 on:  dV = P^T dC, dK = dS^T Q
//   over panels of query rows [r0, r0 + rb), against the keys 0 .. r0 + rb:  dQ = dS K
// with dS = P (dP - D) / sqrt(d), dP = dC V^T and D = rowsum(dC o C) (kernels/attention_panels.h).
#include <algorithm>
#include <cmath>
#include "kernels/attention_panels.h"
#include "kernels/batched_gemm.h"
#include "gpt/attention.h"
#include "gpt/head_gemms.h"

namespace moebench {

using head_gemms::HeadBlocks;
using head_gemms::strided;

void CausalSelfAttention::blocked_forward(AttentionContext& c, void* ctx_heads, const Stream& s) {
  const Core m = core(c);
  const Exec ex = dev_.exec(s);
  const int d = m.d, seq = m.seq, batch = m.batch, panel_rows = std::min(cfg_.panel_rows, seq);
  const HeadBlocks out = m.of(ctx_heads);
  c.stats = alloc_.allocate(std::size_t(batch) * seq * sizeof(float), MemTag::activations, s);
  float* stats = static_cast<float*>(c.stats.data());
  Buffer panel = alloc_.allocate(std::size_t(batch) * panel_rows * seq * m.es, MemTag::temporary, s);
  for (int r0 = 0; r0 < seq; r0 += panel_rows) {
    const int rows = std::min(panel_rows, seq - r0), cols = r0 + rows;  // the keys these rows see
    const long long area = (long long)rows * cols;
    batched_gemm(ex, strided_batch(strided(m.t, false, true, rows, cols, d, m.q.at(r0), m.k.at(0), panel.data(), cols), batch,
                                   m.block, m.block, area));
    attention_panel_softmax_forward(ex, {batch, rows, cols, r0, 0, seq, m.scale}, panel.data(), stats, m.t);
    batched_gemm(ex, strided_batch(strided(m.t, false, false, rows, d, cols, {panel.data(), cols}, m.v.at(0), out.out(r0), d),
                                   batch, area, m.block, m.block));
  }
}

void CausalSelfAttention::blocked_backward(AttentionContext& c, const void* dctx_rows, const void* dctx_heads,
                                           void* dqkv_heads, const Stream& s) {
  const Core m = core(c);
  const Exec ex = dev_.exec(s);
  const int d = m.d, seq = m.seq, batch = m.batch, panel_rows = std::min(cfg_.panel_rows, seq);
  const HeadBlocks dc = m.of(dctx_heads), dq = m.of(dqkv_heads), dk = dq.next(), dv = dk.next();
  const long long block = m.block;
  const float* stats = static_cast<const float*>(c.stats.data());
  Buffer delta = alloc_.allocate(std::size_t(batch) * seq * sizeof(float), MemTag::temporary, s);
  attention_row_dot(ex, c.sequences, seq, cfg_.heads, d, inner(), dctx_rows, c.ctx.data(), static_cast<float*>(delta.data()),
                    m.t);
  const float* dots = static_cast<const float*>(delta.data());
  // Scores then probabilities, and their gradients, of one panel: at most panel_rows x seq per block.
  Buffer probs = alloc_.allocate(std::size_t(batch) * panel_rows * seq * m.es, MemTag::temporary, s);
  Buffer grads = alloc_.allocate(std::size_t(batch) * panel_rows * seq * m.es, MemTag::temporary, s);
  auto over_blocks = [&](const GemmArgs& first, long long stride_a, long long stride_b, long long stride_c) {
    batched_gemm(ex, strided_batch(first, batch, stride_a, stride_b, stride_c));
  };
  // Each pass per panel: S = Q K^T, dP = dC V^T, then P and dS from the statistics, then the
  // gradients the pass owns.
  for (int c0 = 0; c0 < seq; c0 += panel_rows) {
    const int cols = std::min(panel_rows, seq - c0), rows = seq - c0;  // the rows that see these keys
    const long long area = (long long)rows * cols;
    over_blocks(strided(m.t, false, true, rows, cols, d, m.q.at(c0), m.k.at(c0), probs.data(), cols), block, block, area);
    over_blocks(strided(m.t, false, true, rows, cols, d, dc.at(c0), m.v.at(c0), grads.data(), cols), block, block, area);
    attention_panel_softmax_backward(ex, {batch, rows, cols, c0, c0, seq, m.scale}, probs.data(), grads.data(), stats, dots,
                                     m.t);
    over_blocks(strided(m.t, true, false, cols, d, rows, {probs.data(), cols}, dc.at(c0), dv.out(c0), d), area, block, block);
    over_blocks(strided(m.t, true, false, cols, d, rows, {grads.data(), cols}, m.q.at(c0), dk.out(c0), d), area, block, block);
  }
  for (int r0 = 0; r0 < seq; r0 += panel_rows) {
    const int rows = std::min(panel_rows, seq - r0), cols = r0 + rows;  // the keys these rows see
    const long long area = (long long)rows * cols;
    over_blocks(strided(m.t, false, true, rows, cols, d, m.q.at(r0), m.k.at(0), probs.data(), cols), block, block, area);
    over_blocks(strided(m.t, false, true, rows, cols, d, dc.at(r0), m.v.at(0), grads.data(), cols), block, block, area);
    attention_panel_softmax_backward(ex, {batch, rows, cols, r0, 0, seq, m.scale}, probs.data(), grads.data(), stats, dots,
                                     m.t);
    over_blocks(strided(m.t, false, false, rows, d, cols, {grads.data(), cols}, m.k.at(0), dq.out(r0), d), area, block, block);
  }
}

}  // namespace moebench
