// The fused attention core (kernels/sdpa.h) reads Q, K, V where the QKV projection wrote them,
// interleaved in its rows [tokens, 3 heads d]; writes O straight into the context rows
// [tokens, heads d] the output projection reads; and in the backward reads dO from the rows the
// projection's backward writes and writes dQ, dK, dV into rows like the QKV's. No swap either
// way. What the forward keeps for the backward is O and each row's log-sum-exp, not the scores.
#include <cmath>
#include "kernels/sdpa.h"
#include "gpt/attention.h"
#include "gpt/head_gemms.h"

namespace moebench {

namespace {

SdpaShape shape_of(const AttentionContext& c, int heads, int d, DType t) {
  const long long inner = (long long)heads * d, width = 3 * inner;
  SdpaShape s;
  s.sequences = c.sequences;
  s.heads = heads;
  s.seq = c.seq;
  s.head_dim = d;
  s.strides = {c.seq * width, d, width, 1};    // Q (K, V `inner` on) in the rows [tokens, 3 heads d]
  s.o_strides = {c.seq * inner, d, inner, 1};  // the rows [tokens, heads d]
  s.scale = 1.f / std::sqrt(float(d));
  s.t = t;
  return s;
}

}  // namespace

void CausalSelfAttention::cudnn_forward(AttentionContext& c, void* ctx_rows, const Stream& s) {
  const Exec ex = dev_.exec(s);
  const SdpaShape shape = shape_of(c, cfg_.heads, cfg_.head_dim, cfg_.dtype);
  const std::size_t es = dtype_size(cfg_.dtype), in = inner();
  c.stats = alloc_.allocate(std::size_t(c.sequences) * cfg_.heads * c.seq * sizeof(float), MemTag::activations, s);
  const std::size_t bytes = sdpa_forward_workspace(ex, shape);
  Buffer workspace = bytes ? alloc_.allocate(bytes, MemTag::temporary, s) : Buffer{};
  const void* q = c.qkv.data();
  sdpa_forward(ex, shape, q, head_gemms::at(q, in, es), head_gemms::at(q, 2 * in, es), ctx_rows,
               static_cast<float*>(c.stats.data()), workspace.data());
}

void CausalSelfAttention::cudnn_backward(AttentionContext& c, const void* dctx_rows, void* dqkv_rows, const Stream& s) {
  const Exec ex = dev_.exec(s);
  const SdpaShape shape = shape_of(c, cfg_.heads, cfg_.head_dim, cfg_.dtype);
  const std::size_t es = dtype_size(cfg_.dtype), in = inner();
  Buffer workspace = alloc_.allocate(sdpa_backward_workspace(ex, shape), MemTag::temporary, s);
  const void* q = c.qkv.data();
  sdpa_backward(ex, shape, q, head_gemms::at(q, in, es), head_gemms::at(q, 2 * in, es), c.ctx.data(), dctx_rows,
                static_cast<const float*>(c.stats.data()), dqkv_rows, head_gemms::at(dqkv_rows, in, es),
                head_gemms::at(dqkv_rows, 2 * in, es), workspace.data());
}

}  // namespace moebench
