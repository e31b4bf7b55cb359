#include "gpt/attention.h"
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>
#include "kernels/batched_gemm.h"
#include "kernels/causal_softmax.h"
#include "kernels/gemm.h"
#include "kernels/sdpa.h"
#include "kernels/swap_dims.h"
#include "moe/init.h"
#include "gpt/head_gemms.h"
#include "gpt/typed_upload.h"
#include "runtime/range.h"

namespace moebench {

using head_gemms::head_blocks;
using head_gemms::HeadBlocks;
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
    case AttentionKernel::cudnn: return "cudnn";
  }
  return "?";
}

std::optional<AttentionKernel> parse_attention_kernel(const std::string& name) {
  for (AttentionKernel k : {AttentionKernel::materialized, AttentionKernel::blocked, AttentionKernel::cudnn})
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
  if (kernel_ == AttentionKernel::cudnn) {
    SdpaShape probe;
    probe.head_dim = cfg.head_dim;
    probe.t = cfg.dtype;
    if (const std::string why = sdpa_unsupported(dev.exec(dev.default_stream()), probe); !why.empty())
      throw Error("CausalSelfAttention: the cudnn kernel: " + why);
  }
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
  const int H = cfg_.hidden, d = cfg_.head_dim, in = inner(), W = qkv_width(), T = sequences * seq;
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t);
  const Exec ex = dev_.exec(s);
  AttentionContext c;
  c.sequences = sequences;
  c.seq = seq;
  c.x = x;
  const bool fused = kernel_ == AttentionKernel::cudnn;  // reads the QKV rows in place: no swaps
  Buffer rows = alloc_.allocate(std::size_t(T) * W * es, fused ? MemTag::activations : MemTag::temporary, s);
  {
    ScopedRange r("attention.qkv.fwd", s, breakdown_);
    gemm(ex, dense_gemm(false, false, T, W, H, x, wqkv_.data(), rows.data(), t));
  }
  {
    ScopedRange r("attention.core.fwd", s, breakdown_);
    if (fused) {
      c.qkv = std::move(rows);
      c.ctx = alloc_.allocate(std::size_t(T) * in * es, MemTag::activations, s);
      cudnn_forward(c, c.ctx.data(), s);
    } else {
      c.qkv = alloc_.allocate(std::size_t(T) * W * es, MemTag::activations, s);
      swap_dims(ex, T, 3 * cfg_.heads, d, es, rows.data(), c.qkv.data());  // [3 heads, T, d]
      rows.release();
      Buffer ctx_heads = alloc_.allocate(std::size_t(T) * in * es, MemTag::temporary, s);
      if (kernel_ == AttentionKernel::blocked)
        blocked_forward(c, ctx_heads.data(), s);
      else
        materialized_forward(c, ctx_heads.data(), s);
      c.ctx = alloc_.allocate(std::size_t(T) * in * es, MemTag::activations, s);
      swap_dims(ex, cfg_.heads, T, d, es, ctx_heads.data(), c.ctx.data());  // back to rows [T, heads d]
    }
  }
  ScopedRange r("attention.out.fwd", s, breakdown_);
  gemm(ex, dense_gemm(false, false, T, H, in, c.ctx.data(), wo_.data(), y, t, 1.f, accumulate ? 1.f : 0.f));
  return c;
}

CausalSelfAttention::Core CausalSelfAttention::core(const AttentionContext& c) const {
  const int d = cfg_.head_dim, tokens = c.sequences * c.seq;
  const std::size_t es = dtype_size(cfg_.dtype);
  const HeadBlocks q = head_blocks(c.qkv.data(), cfg_.heads, tokens, d, es);
  return Core{d, c.seq, tokens, cfg_.heads * c.sequences, (long long)c.seq * d, cfg_.dtype, es, 1.f / std::sqrt(float(d)),
              q, q.next(), q.next().next()};
}

void CausalSelfAttention::materialized_forward(AttentionContext& c, void* ctx_heads, const Stream& s) {
  const Core m = core(c);
  const Exec ex = dev_.exec(s);
  const long long square = (long long)m.seq * m.seq;
  c.probs = alloc_.allocate(std::size_t(m.batch) * square * m.es, MemTag::activations, s);
  batched_gemm(ex, strided_batch(strided(m.t, false, true, m.seq, m.seq, m.d, m.q.at(0), m.k.at(0), c.probs.data(), m.seq),
                                 m.batch, m.block, m.block, square));
  causal_softmax_forward(ex, {m.batch, m.seq, m.scale}, c.probs.data(), c.probs.data(), m.t);
  batched_gemm(ex, strided_batch(strided(m.t, false, false, m.seq, m.d, m.seq, {c.probs.data(), m.seq}, m.v.at(0), ctx_heads,
                                         m.d),
                                 m.batch, square, m.block, m.block));
}

void CausalSelfAttention::backward(AttentionContext& c, const void* dy, void* dx, const Stream& s, bool accumulate,
                                   std::vector<WeightTask>* deferred) {
  const int H = cfg_.hidden, d = cfg_.head_dim, in = inner(), W = qkv_width(), T = c.sequences * c.seq;
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t);
  const Exec ex = dev_.exec(s);
  Buffer dctx = alloc_.allocate(std::size_t(T) * in * es, MemTag::temporary, s);
  {
    ScopedRange r("attention.out.bwd", s, breakdown_);
    gemm(ex, dense_gemm(false, true, T, in, H, dy, wo_.data(), dctx.data(), t));  // dC = dy Wo^T
  }
  auto dqkv = std::make_shared<Buffer>(alloc_.allocate(std::size_t(T) * W * es, MemTag::activations, s));
  {
    ScopedRange r("attention.core.bwd", s, breakdown_);
    if (kernel_ == AttentionKernel::cudnn) {
      cudnn_backward(c, dctx.data(), dqkv->data(), s);  // straight into the rows [T, 3 heads d]
    } else {
      Buffer dqkv_heads = alloc_.allocate(std::size_t(T) * W * es, MemTag::temporary, s);
      Buffer dctx_heads = alloc_.allocate(std::size_t(T) * in * es, MemTag::temporary, s);
      swap_dims(ex, T, cfg_.heads, d, es, dctx.data(), dctx_heads.data());
      if (kernel_ == AttentionKernel::blocked)
        blocked_backward(c, dctx.data(), dctx_heads.data(), dqkv_heads.data(), s);
      else
        materialized_backward(c, dctx_heads.data(), dqkv_heads.data(), s);
      dctx_heads.release();
      swap_dims(ex, 3 * cfg_.heads, T, d, es, dqkv_heads.data(), dqkv->data());  // back to rows [T, 3 heads d]
    }
  }
  dctx.release();
  {
    ScopedRange r("attention.qkv.bwd", s, breakdown_);
    gemm(ex, dense_gemm(false, true, T, H, W, dqkv->data(), wqkv_.data(), dx, t, 1.f, accumulate ? 1.f : 0.f));
  }
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
    ScopedRange r("attention.wgrad", st, breakdown_);
    gemm(e, dense_gemm(true, false, in, H, T, ctx->data(), dy_kept ? dy_kept->data() : dy, dwo_.data(), t, 1.f, 1.f));
    gemm(e, dense_gemm(true, false, H, W, T, x, dqkv->data(), dwqkv_.data(), t, 1.f, 1.f));
  };
  if (deferred)
    deferred->push_back(std::move(w));
  else
    w(s);
}

void CausalSelfAttention::materialized_backward(AttentionContext& c, const void* dctx_heads, void* dqkv_heads,
                                                const Stream& s) {
  const Core m = core(c);
  const Exec ex = dev_.exec(s);
  const HeadBlocks dc = m.of(dctx_heads), dq = m.of(dqkv_heads), dk = dq.next(), dv = dk.next();
  const int seq = m.seq, d = m.d;
  const long long block = m.block, square = (long long)seq * seq;
  Buffer dp = alloc_.allocate(std::size_t(m.batch) * square * m.es, MemTag::temporary, s);  // dP, then dS
  const View p{c.probs.data(), seq}, ds{dp.data(), seq};
  auto over_blocks = [&](const GemmArgs& first, long long stride_a, long long stride_b, long long stride_c) {
    batched_gemm(ex, strided_batch(first, m.batch, stride_a, stride_b, stride_c));
  };
  over_blocks(strided(m.t, false, true, seq, seq, d, dc.at(0), m.v.at(0), dp.data(), seq), block, block, square);  // dP = dC V^T
  over_blocks(strided(m.t, true, false, seq, d, seq, p, dc.at(0), dv.out(0), d), square, block, block);              // dV = P^T dC
  causal_softmax_backward(ex, {m.batch, seq, m.scale}, c.probs.data(), dp.data(), dp.data(), m.t);
  over_blocks(strided(m.t, false, false, seq, d, seq, ds, m.k.at(0), dq.out(0), d), square, block, block);  // dQ = dS K
  over_blocks(strided(m.t, true, false, seq, d, seq, ds, m.q.at(0), dk.out(0), d), square, block, block);   // dK = dS^T Q
}

}  // namespace moebench
