// Blocked causal attention: the scores of a panel of query rows at a time (every head of every
// sequence in one strided batch, head-major), each panel only as wide as the keys its rows see,
// with each row's log-sum-exp kept in place of the probabilities. The backward recomputes the panels from those statistics in two passes so
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

using head_gemms::head_blocks;
using head_gemms::HeadBlocks;
using head_gemms::strided;

void CausalSelfAttention::blocked_forward(AttentionContext& c, void* ctx_heads, const Stream& s) {
  const int d = cfg_.head_dim, seq = c.seq, T = c.sequences * seq, batch = cfg_.heads * c.sequences;
  const int panel_rows = std::min(cfg_.panel_rows, seq);
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t);
  const Exec ex = dev_.exec(s);
  const float scale = 1.f / std::sqrt(float(d));
  const HeadBlocks q = head_blocks(c.qkv.data(), cfg_.heads, T, d, es), k = q.next(), v = k.next();
  const HeadBlocks out = head_blocks(ctx_heads, cfg_.heads, T, d, es);
  const long long block = (long long)seq * d;
  c.stats = alloc_.allocate(std::size_t(batch) * seq * sizeof(float), MemTag::activations, s);
  float* stats = static_cast<float*>(c.stats.data());
  Buffer panel = alloc_.allocate(std::size_t(batch) * panel_rows * seq * es, MemTag::temporary, s);
  for (int r0 = 0; r0 < seq; r0 += panel_rows) {
    const int rows = std::min(panel_rows, seq - r0), cols = r0 + rows;  // the keys these rows see
    const long long area = (long long)rows * cols;
    batched_gemm(ex, strided_batch(strided(t, false, true, rows, cols, d, q.at(r0), k.at(0), panel.data(), cols), batch,
                                   block, block, area));
    attention_panel_softmax_forward(ex, {batch, rows, cols, r0, 0, seq, scale}, panel.data(), stats, t);
    batched_gemm(ex, strided_batch(strided(t, false, false, rows, d, cols, {panel.data(), cols}, v.at(0), out.out(r0), d),
                                   batch, area, block, block));
  }
}

void CausalSelfAttention::blocked_backward(AttentionContext& c, const void* dctx_rows, const void* dctx_heads,
                                           void* dqkv_heads, const Stream& s) {
  const int d = cfg_.head_dim, seq = c.seq, T = c.sequences * seq, batch = cfg_.heads * c.sequences;
  const int panel_rows = std::min(cfg_.panel_rows, seq);
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t);
  const Exec ex = dev_.exec(s);
  const float scale = 1.f / std::sqrt(float(d));
  const HeadBlocks q = head_blocks(c.qkv.data(), cfg_.heads, T, d, es), k = q.next(), v = k.next();
  const HeadBlocks dc = head_blocks(dctx_heads, cfg_.heads, T, d, es);
  const HeadBlocks dq = head_blocks(dqkv_heads, cfg_.heads, T, d, es), dk = dq.next(), dv = dk.next();
  const long long block = (long long)seq * d;
  const float* stats = static_cast<const float*>(c.stats.data());
  Buffer delta = alloc_.allocate(std::size_t(batch) * seq * sizeof(float), MemTag::temporary, s);
  attention_row_dot(ex, c.sequences, seq, cfg_.heads, d, inner(), dctx_rows, c.ctx.data(), static_cast<float*>(delta.data()),
                    t);
  const float* dots = static_cast<const float*>(delta.data());
  // Scores then probabilities, and their gradients, of one panel: at most panel_rows x seq per block.
  Buffer probs = alloc_.allocate(std::size_t(batch) * panel_rows * seq * es, MemTag::temporary, s);
  Buffer grads = alloc_.allocate(std::size_t(batch) * panel_rows * seq * es, MemTag::temporary, s);
  auto over_blocks = [&](const GemmArgs& first, long long stride_a, long long stride_b, long long stride_c) {
    batched_gemm(ex, strided_batch(first, batch, stride_a, stride_b, stride_c));
  };
  for (int c0 = 0; c0 < seq; c0 += panel_rows) {
    const int cols = std::min(panel_rows, seq - c0), rows = seq - c0;  // the rows that see these keys
    const long long area = (long long)rows * cols;
    over_blocks(strided(t, false, true, rows, cols, d, q.at(c0), k.at(c0), probs.data(), cols), block, block, area);   // S
    over_blocks(strided(t, false, true, rows, cols, d, dc.at(c0), v.at(c0), grads.data(), cols), block, block, area);  // dP
    attention_panel_softmax_backward(ex, {batch, rows, cols, c0, c0, seq, scale}, probs.data(), grads.data(), stats, dots, t);
    over_blocks(strided(t, true, false, cols, d, rows, {probs.data(), cols}, dc.at(c0), dv.out(c0), d), area, block, block);
    over_blocks(strided(t, true, false, cols, d, rows, {grads.data(), cols}, q.at(c0), dk.out(c0), d), area, block, block);
  }
  for (int r0 = 0; r0 < seq; r0 += panel_rows) {
    const int rows = std::min(panel_rows, seq - r0), cols = r0 + rows;  // the keys these rows see
    const long long area = (long long)rows * cols;
    over_blocks(strided(t, false, true, rows, cols, d, q.at(r0), k.at(0), probs.data(), cols), block, block, area);   // S
    over_blocks(strided(t, false, true, rows, cols, d, dc.at(r0), v.at(0), grads.data(), cols), block, block, area);  // dP
    attention_panel_softmax_backward(ex, {batch, rows, cols, r0, 0, seq, scale}, probs.data(), grads.data(), stats, dots, t);
    over_blocks(strided(t, false, false, rows, d, cols, {grads.data(), cols}, k.at(0), dq.out(r0), d), area, block, block);
  }
}

}  // namespace moebench
