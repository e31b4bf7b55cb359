#include "pipeline/attention.h"
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>
#include "kernels/batched_gemm.h"
#include "kernels/causal_softmax.h"
#include "kernels/gemm.h"
#include "moe/init.h"
#include "pipeline/head_gemms.h"
#include "pipeline/typed_upload.h"

namespace moebench {

using head_gemms::at;
using head_gemms::strided;
using head_gemms::View;

namespace {
// Seeds' stream ids: (layer, global head, which of q, k, v, o).
std::uint64_t weight_id(int layer, int head, int which) { return 100000 + (std::uint64_t(layer) * 4096 + head) * 4 + which; }
}  // namespace


const char* attention_kernel_name(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::by_backend: return "by_backend";
    case AttentionKernel::materialized: return "materialized";
    case AttentionKernel::blocked: return "blocked";
  }
  return "?";
}

std::optional<AttentionKernel> parse_attention_kernel(const std::string& name) {
  for (AttentionKernel k : {AttentionKernel::materialized, AttentionKernel::blocked})
    if (name == attention_kernel_name(k)) return k;
  return std::nullopt;
}

CausalSelfAttention::CausalSelfAttention(const AttentionConfig& cfg, Device& dev, TrackingAllocator& alloc)
    : cfg_(cfg),
      kernel_(cfg.kernel != AttentionKernel::by_backend ? cfg.kernel
              : dev.backend() == Backend::cuda         ? AttentionKernel::blocked
                                                       : AttentionKernel::materialized),
      dev_(dev),
      alloc_(alloc) {
  if (cfg.hidden < 1 || cfg.heads < 1 || cfg.head_dim < 1 || cfg.panel_rows < 1)
    throw Error("CausalSelfAttention: hidden " + std::to_string(cfg.hidden) + ", heads " + std::to_string(cfg.heads) +
                ", head_dim " + std::to_string(cfg.head_dim) + " and panel_rows " + std::to_string(cfg.panel_rows) +
                " must be >= 1");
  const std::size_t es = dtype_size(cfg.dtype);
  const std::size_t qkv = std::size_t(cfg.hidden) * qkv_width() * es, o = std::size_t(inner()) * cfg.hidden * es;
  wqkv_ = alloc_.allocate(qkv, MemTag::model_states);
  dwqkv_ = alloc_.allocate(qkv, MemTag::model_states);
  wo_ = alloc_.allocate(o, MemTag::model_states);
  dwo_ = alloc_.allocate(o, MemTag::model_states);
}

void CausalSelfAttention::init(std::uint64_t seed, const Stream& s) {
  const int H = cfg_.hidden, d = cfg_.head_dim, in = inner(), W = qkv_width();
  const float std_dev = 0.5f / std::sqrt(float(H));
  std::vector<float> qkv(std::size_t(H) * W), o(std::size_t(in) * H);
  for (int h = 0; h < cfg_.heads; ++h) {
    const int g = cfg_.first_head + h;
    for (int which = 0; which < 3; ++which) {  // Q, K, V: [hidden, d] column blocks
      const auto blk = normal_vector(std::size_t(H) * d, seed, weight_id(cfg_.layer, g, which), std_dev);
      for (int r = 0; r < H; ++r)
        for (int c = 0; c < d; ++c) qkv[std::size_t(r) * W + which * in + h * d + c] = blk[std::size_t(r) * d + c];
    }
    const auto blk = normal_vector(std::size_t(d) * H, seed, weight_id(cfg_.layer, g, 3), std_dev);  // Wo rows
    std::copy(blk.begin(), blk.end(), o.begin() + std::size_t(h) * d * H);
  }
  upload_as(dev_, wqkv_.data(), qkv, cfg_.dtype, s);
  upload_as(dev_, wo_.data(), o, cfg_.dtype, s);
  zero_grad(s);
}

void CausalSelfAttention::zero_grad(const Stream& s) {
  dev_.fill_zero(dwqkv_.data(), dwqkv_.bytes(), s);
  dev_.fill_zero(dwo_.data(), dwo_.bytes(), s);
}

AttentionContext CausalSelfAttention::forward(const void* x, void* y, int sequences, int seq, const Stream& s, bool accumulate) {
  const int H = cfg_.hidden, in = inner(), W = qkv_width(), T = sequences * seq;
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t);
  const Exec ex = dev_.exec(s);
  AttentionContext c;
  c.sequences = sequences;
  c.seq = seq;
  c.x = x;
  c.qkv = alloc_.allocate(std::size_t(T) * W * es, MemTag::activations, s);
  c.ctx = alloc_.allocate(std::size_t(T) * in * es, MemTag::activations, s);
  gemm(ex, dense_gemm(false, false, T, W, H, x, wqkv_.data(), c.qkv.data(), t));
  if (kernel_ == AttentionKernel::blocked)
    blocked_forward(c, s);
  else
    materialized_forward(c, s);
  gemm(ex, dense_gemm(false, false, T, H, in, c.ctx.data(), wo_.data(), y, t, 1.f, accumulate ? 1.f : 0.f));
  return c;
}

void CausalSelfAttention::materialized_forward(AttentionContext& c, const Stream& s) {
  const int d = cfg_.head_dim, in = inner(), W = qkv_width(), seq = c.seq, sequences = c.sequences;
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t);
  const Exec ex = dev_.exec(s);
  c.probs = alloc_.allocate(std::size_t(sequences) * cfg_.heads * seq * seq * es, MemTag::activations, s);
  // Per sequence, one strided batch over the heads: head h's Q, K, V columns are h d elements
  // after head 0's, its [seq, seq] scores seq^2 after.
  const int heads = cfg_.heads;
  const long long d_stride = d, square = (long long)seq * seq;
  for (int b = 0; b < sequences; ++b) {
    const std::size_t row0 = std::size_t(b) * seq;
    const View q{at(c.qkv.data(), row0 * W, es), W}, k{at(c.qkv.data(), row0 * W + in, es), W};
    void* scores = at(c.probs.data(), std::size_t(b) * heads * seq * seq, es);
    batched_gemm(ex, strided_batch(strided(t, false, true, seq, seq, d, q, k, scores, seq), heads, d_stride, d_stride, square));
  }
  const CausalSoftmaxShape sm{sequences * heads, seq, 1.f / std::sqrt(float(d))};
  causal_softmax_forward(ex, sm, c.probs.data(), c.probs.data(), t);
  for (int b = 0; b < sequences; ++b) {
    const std::size_t row0 = std::size_t(b) * seq;
    const View p{at(c.probs.data(), std::size_t(b) * heads * seq * seq, es), seq}, v{at(c.qkv.data(), row0 * W + 2 * in, es), W};
    batched_gemm(ex, strided_batch(strided(t, false, false, seq, d, seq, p, v, at(c.ctx.data(), row0 * in, es), in), heads,
                                   square, d_stride, d_stride));
  }
}

void CausalSelfAttention::backward(AttentionContext& c, const void* dy, void* dx, const Stream& s, bool accumulate,
                                   std::vector<WeightTask>* deferred) {
  const int H = cfg_.hidden, in = inner(), W = qkv_width(), T = c.sequences * c.seq;
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t);
  const Exec ex = dev_.exec(s);
  Buffer dctx = alloc_.allocate(std::size_t(T) * in * es, MemTag::temporary, s);
  auto dqkv = std::make_shared<Buffer>(alloc_.allocate(std::size_t(T) * W * es, MemTag::activations, s));
  gemm(ex, dense_gemm(false, true, T, in, H, dy, wo_.data(), dctx.data(), t));  // dC = dy Wo^T
  if (kernel_ == AttentionKernel::blocked)
    blocked_backward(c, dctx.data(), dqkv->data(), s);
  else
    materialized_backward(c, dctx.data(), dqkv->data(), s);
  dctx.release();
  gemm(ex, dense_gemm(false, true, T, H, W, dqkv->data(), wqkv_.data(), dx, t, 1.f, accumulate ? 1.f : 0.f));
  c.qkv.release();
  c.probs.release();
  c.stats.release();
  // W: dWo += C^T dy; dWqkv += x^T dQKV. Deferred, it keeps its own copy of dy.
  auto ctx = std::make_shared<Buffer>(std::move(c.ctx));
  std::shared_ptr<Buffer> dy_kept;
  if (deferred) {
    dy_kept = std::make_shared<Buffer>(alloc_.allocate(std::size_t(T) * H * es, MemTag::activations, s));
    dev_.copy(dy_kept->data(), dy, std::size_t(T) * H * es, s);
  }
  WeightTask w = [this, ctx, dqkv, dy_kept, dy, x = c.x, T, H, in, W, t](const Stream& st) {
    const Exec e = dev_.exec(st);
    gemm(e, dense_gemm(true, false, in, H, T, ctx->data(), dy_kept ? dy_kept->data() : dy, dwo_.data(), t, 1.f, 1.f));
    gemm(e, dense_gemm(true, false, H, W, T, x, dqkv->data(), dwqkv_.data(), t, 1.f, 1.f));
  };
  if (deferred)
    deferred->push_back(std::move(w));
  else
    w(s);
}

void CausalSelfAttention::materialized_backward(AttentionContext& c, const void* dctx, void* dqkv, const Stream& s) {
  const int d = cfg_.head_dim, in = inner(), W = qkv_width(), seq = c.seq;
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t);
  const Exec ex = dev_.exec(s);
  const int heads = cfg_.heads;
  const long long d_stride = d, square = (long long)seq * seq;
  // One sequence's score gradients, every head's: [heads, seq, seq].
  Buffer dp = alloc_.allocate(std::size_t(heads) * seq * seq * es, MemTag::temporary, s);
  const CausalSoftmaxShape sm{heads, seq, 1.f / std::sqrt(float(d))};
  // Per sequence, strided batches over the heads (as in forward).
  auto over_heads = [&](const GemmArgs& head0, long long stride_a, long long stride_b, long long stride_c) {
    batched_gemm(ex, strided_batch(head0, heads, stride_a, stride_b, stride_c));
  };
  for (int b = 0; b < c.sequences; ++b) {
    const std::size_t row0 = std::size_t(b) * seq;
    const View p{at(c.probs.data(), std::size_t(b) * heads * seq * seq, es), seq}, q{at(c.qkv.data(), row0 * W, es), W},
        k{at(c.qkv.data(), row0 * W + in, es), W}, v{at(c.qkv.data(), row0 * W + 2 * in, es), W},
        dc{at(dctx, row0 * in, es), in};
    void* dq = at(dqkv, row0 * W, es);
    void* dk = at(dqkv, row0 * W + in, es);
    void* dv = at(dqkv, row0 * W + 2 * in, es);
    over_heads(strided(t, false, true, seq, seq, d, dc, v, dp.data(), seq), d_stride, d_stride, square);  // dP = dC V^T
    over_heads(strided(t, true, false, seq, d, seq, p, dc, dv, W), square, d_stride, d_stride);           // dV = P^T dC
    causal_softmax_backward(ex, sm, p.p, dp.data(), dp.data(), t);
    const View ds{dp.data(), seq};
    over_heads(strided(t, false, false, seq, d, seq, ds, k, dq, W), square, d_stride, d_stride);  // dQ = dS K
    over_heads(strided(t, true, false, seq, d, seq, ds, q, dk, W), square, d_stride, d_stride);   // dK = dS^T Q
  }
}

}  // namespace moebench
