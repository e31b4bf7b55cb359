#include "gpt/transformer_block.h"
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "kernels/axpy.h"
#include "kernels/batched_gemm.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "moe/init.h"
#include "models/layout_rules.h"
#include "gpt/typed_upload.h"

namespace moebench {

std::optional<std::string> TransformerBlock::validate(const TransformerBlockConfig& c, int tp_size) {
  return block_split_error(c.hidden, c.heads, c.ffn, tp_size);
}

namespace {
AttentionConfig attention_config(const TransformerBlockConfig& c, Communicator* tp) {
  const int t = tp ? tp->size() : 1, r = tp ? tp->rank() : 0;
  if (auto e = TransformerBlock::validate(c, t)) throw Error("TransformerBlock: " + *e);
  AttentionConfig a{c.hidden, c.heads / t, c.hidden / c.heads, r * (c.heads / t), c.layer, c.dtype};
  a.kernel = c.attention;
  a.panel_rows = c.attention_panel_rows;
  return a;
}
}  // namespace

TransformerBlock::TransformerBlock(const TransformerBlockConfig& cfg, Device& dev, TrackingAllocator& alloc, Communicator* tp,
                                   const DispatcherFactory& dispatcher)
    : cfg_(cfg), dev_(dev), alloc_(alloc), tp_(tp), tp_rank_(tp ? tp->rank() : 0), tp_size_(tp ? tp->size() : 1),
      ffn_local_(cfg.ffn / (tp ? tp->size() : 1)), attn_(attention_config(cfg, tp), dev, alloc) {
  const std::size_t h = std::size_t(cfg.hidden) * 4, w = std::size_t(cfg.hidden) * ffn_local_ * dtype_size(cfg.dtype);
  for (Buffer* b : {&g1_, &b1_, &g2_, &b2_, &dg1_, &db1_, &dg2_, &db2_}) *b = alloc_.allocate(h, MemTag::model_states);
  if (cfg.moe) {
    if (!dispatcher) throw Error("TransformerBlock: an MoE block needs a dispatcher");
    MoEConfig m = *cfg.moe;
    m.hidden = cfg.hidden;
    m.dtype = cfg.dtype;
    moe_ = std::make_unique<MoELayer>(m, dev, alloc, dispatcher(DispatcherEnv{m, dev, alloc}));
  } else {
    for (Buffer* b : {&w1_, &w2_, &dw1_, &dw2_}) *b = alloc_.allocate(w, MemTag::model_states);
  }
}

void TransformerBlock::init(std::uint64_t seed, const Stream& s) {
  attn_.init(seed, s);
  const std::size_t H = cfg_.hidden, F = cfg_.ffn;
  const std::vector<float> ones(H, 1.f);
  dev_.copy_to_device(g1_.data(), ones.data(), H * 4, s);
  dev_.copy_to_device(g2_.data(), ones.data(), H * 4, s);
  dev_.fill_zero(b1_.data(), b1_.bytes(), s);
  dev_.fill_zero(b2_.data(), b2_.bytes(), s);
  std::vector<float> w1, w2;
  if (moe_) {  // every MoE layer its own weights: the seed and the layer
    moe_->init(seed * 1000003 + std::uint64_t(cfg_.layer), s);
  } else {  // this rank's slice of the whole block's W1 (columns) and W2 (rows)
    const std::size_t f = ffn_local_, first = std::size_t(tp_rank_) * f;
    const auto w1_all = normal_vector(H * F, seed, 200000 + 2 * std::uint64_t(cfg_.layer), 0.5f / std::sqrt(float(H)));
    w2 = normal_vector(f * H, seed, 200001 + 2 * std::uint64_t(cfg_.layer), 0.5f / std::sqrt(float(F)), first * H);
    w1.resize(H * f);
    for (std::size_t r = 0; r < H; ++r)
      for (std::size_t c = 0; c < f; ++c) w1[r * f + c] = w1_all[r * F + first + c];
    upload_as(dev_, w1_.data(), w1, cfg_.dtype, s);
    upload_as(dev_, w2_.data(), w2, cfg_.dtype, s);
  }
  zero_grad(s);
  s.synchronize();  // the host vectors go out of scope
}

void TransformerBlock::zero_grad(const Stream& s) {
  attn_.zero_grad(s);
  for (Buffer* b : {&dg1_, &db1_, &dg2_, &db2_, &dw1_, &dw2_})
    if (*b) dev_.fill_zero(b->data(), b->bytes(), s);
  if (moe_) moe_->zero_grad(s);
}

std::vector<std::pair<Buffer*, Buffer*>> TransformerBlock::parameters() {
  std::vector<std::pair<Buffer*, Buffer*>> out = {{&g1_, &dg1_},
                                                  {&b1_, &db1_},
                                                  {&attn_.wqkv(), const_cast<Buffer*>(&attn_.wqkv_grad())},
                                                  {&attn_.wo(), const_cast<Buffer*>(&attn_.wo_grad())},
                                                  {&g2_, &dg2_},
                                                  {&b2_, &db2_}};
  if (moe_) {  // the gate, then this rank's experts
    for (auto& p : moe_parameters()) out.push_back(p);
  } else {
    out.push_back({&w1_, &dw1_});
    out.push_back({&w2_, &dw2_});
  }
  return out;
}

std::vector<TrainedParameter> TransformerBlock::trained_parameters() {
  std::vector<TrainedParameter> out;
  for (auto [w, g] : parameters()) {
    const bool fp32 = w == &g1_ || w == &b1_ || w == &g2_ || w == &b2_ || (moe_ && w == &moe_->gate().weight());
    out.push_back({w, g, fp32 ? DType::f32 : cfg_.dtype});
  }
  return out;
}

std::vector<std::pair<Buffer*, Buffer*>> TransformerBlock::moe_parameters() {
  if (!moe_) return {};
  return {{&moe_->gate().weight(), &moe_->gate().grad()},
          {&moe_->experts().w1(), &moe_->experts().w1_grad()},
          {&moe_->experts().w2(), &moe_->experts().w2_grad()}};
}

BlockContext TransformerBlock::forward(const void* x, void* y, int sequences, int seq, const Stream& s) {
  const int H = cfg_.hidden, F = ffn_local_, T = sequences * seq;
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t), xb = std::size_t(T) * H * es, zb = std::size_t(T) * F * es;
  const Exec ex = dev_.exec(s);
  // g: the partial outputs of the ranks summed; the residual enters on one rank only.
  auto residual = [&](void* out, const void* in) {
    if (tp_rank_ == 0) dev_.copy(out, in, xb, s); else dev_.fill_zero(out, xb, s);
  };
  auto reduce = [&](void* buf) {
    if (tp_) tp_->all_reduce(buf, buf, std::size_t(T) * H, t, ReduceOp::sum, s);
  };
  BlockContext c;
  c.sequences = sequences;
  c.seq = seq;
  c.x = x;
  auto act = [&](std::size_t bytes) { return alloc_.allocate(bytes, MemTag::activations, s); };
  c.ln1 = act(xb);
  c.mean1 = act(std::size_t(T) * 4);
  c.rstd1 = act(std::size_t(T) * 4);
  c.h = act(xb);
  c.ln2 = act(xb);
  c.mean2 = act(std::size_t(T) * 4);
  c.rstd2 = act(std::size_t(T) * 4);
  if (!moe_) {
    c.z = act(zb);
    c.a = act(zb);
  }
  const LayerNormShape ln{T, H};
  {
    ScopedRange r("ln.fwd", s, breakdown_);
    layernorm_forward(ex, ln, x, g1_.as<float>(), b1_.as<float>(), c.ln1.data(), c.mean1.as<float>(), c.rstd1.as<float>(),
                      t);
    residual(c.h.data(), x);
  }
  {
    ScopedRange r("attention.fwd", s, breakdown_);
    c.attention = attn_.forward(c.ln1.data(), c.h.data(), sequences, seq, s, /*accumulate=*/true);
    reduce(c.h.data());
  }
  {
    ScopedRange r("ln.fwd", s, breakdown_);
    layernorm_forward(ex, ln, c.h.data(), g2_.as<float>(), b2_.as<float>(), c.ln2.data(), c.mean2.as<float>(),
                      c.rstd2.as<float>(), t);
  }
  if (moe_) {  // y = h + MoE(LN2(h)), whole on every rank (PPMoE all-reduced it inside)
    ScopedRange r("moe.fwd", s, breakdown_);
    c.z = act(xb);
    c.moe = moe_->forward(c.ln2.data(), T, c.z.data(), s, breakdown_);
    dev_.copy(y, c.h.data(), xb, s);
    axpy(ex, std::size_t(T) * H, 1.f, c.z.data(), y, t);
    return c;
  }
  {
    ScopedRange r("ffn.fwd", s, breakdown_);
    const GemmArgs first = dense_gemm(false, false, T, F, H, c.ln2.data(), w1_.data(), c.a.data(), t);
    if (epilogue_fits(ex, F)) {  // a = GeLU(z) in the GEMM's epilogue, z kept as its aux output
      batched_gemm(ex, with_epilogue(first, Epilogue::gelu_aux, c.z.data()));
    } else {
      gemm(ex, dense_gemm(false, false, T, F, H, c.ln2.data(), w1_.data(), c.z.data(), t));
      gelu_forward(ex, c.z.data(), c.a.data(), std::size_t(T) * F, t);
    }
    residual(y, c.h.data());
    gemm(ex, dense_gemm(false, false, T, H, F, c.a.data(), w2_.data(), y, t, 1.f, 1.f));
  }
  if (tp_) {
    ScopedRange r("ffn.allreduce", s, breakdown_);
    reduce(y);
  }
  return c;
}

void TransformerBlock::backward(BlockContext& c, const void* dy, void* dx, const Stream& s, bool defer) {
  const int H = cfg_.hidden, F = ffn_local_, T = c.sequences * c.seq;
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t), n = std::size_t(T) * H, xb = n * es;
  const Exec ex = dev_.exec(s);
  std::vector<WeightTask>* later = defer ? &c.weight_tasks : nullptr;
  // f's backward: the ranks' partial input gradients summed.
  auto reduce = [&](void* buf) {
    if (tp_) tp_->all_reduce(buf, buf, n, t, ReduceOp::sum, s);
  };
  Buffer dh = alloc_.allocate(xb, MemTag::temporary, s), dln = alloc_.allocate(xb, MemTag::temporary, s),
         tmp = alloc_.allocate(xb, MemTag::temporary, s);
  if (moe_) {  // the MoE layer's input gradient (PPMoE sums it over the group inside)
    ScopedRange r("moe.bwd", s, breakdown_);
    moe_->backward(c.moe, dy, dln.data(), s, breakdown_);
  } else {  // MLP: dz = GeLU'(z) (dy W2^T); dLN2 = dz W1^T; W: dW2 += a^T dy, dW1 += LN2^T dz
    std::optional<ScopedRange> r(std::in_place, "ffn.bwd", s, breakdown_);
    auto dz = std::make_shared<Buffer>(alloc_.allocate(std::size_t(T) * F * es, MemTag::activations, s));
    const GemmArgs da = dense_gemm(false, true, T, F, H, dy, w2_.data(), dz->data(), t);
    if (epilogue_fits(ex, F)) {  // GeLU's gradient in the GEMM's epilogue, from the kept z
      batched_gemm(ex, with_epilogue(da, Epilogue::dgelu, c.z.data()));
    } else {
      gemm(ex, da);
      gelu_backward(ex, c.z.data(), dz->data(), dz->data(), std::size_t(T) * F, t);
    }
    gemm(ex, dense_gemm(false, true, T, H, F, dz->data(), w1_.data(), dln.data(), t));
    reduce(dln.data());
    r.reset();
    auto a = std::make_shared<Buffer>(std::move(c.a)), ln2 = std::make_shared<Buffer>(std::move(c.ln2));
    std::shared_ptr<Buffer> dy_kept;
    if (defer) {
      dy_kept = std::make_shared<Buffer>(alloc_.allocate(xb, MemTag::activations, s));
      dev_.copy(dy_kept->data(), dy, xb, s);
    }
    WeightTask w = [this, a, ln2, dz, dy_kept, dy, T, H, F, t](const Stream& st) {
      const Exec e = dev_.exec(st);
      ScopedRange r("ffn.wgrad", st, breakdown_);
      gemm(e, dense_gemm(true, false, F, H, T, a->data(), dy_kept ? dy_kept->data() : dy, dw2_.data(), t, 1.f, 1.f));
      gemm(e, dense_gemm(true, false, H, F, T, ln2->data(), dz->data(), dw1_.data(), t, 1.f, 1.f));
    };
    if (later) later->push_back(std::move(w)); else w(s);
  }
  {  // dh = dy + LN2's backward.
    ScopedRange r("ln.bwd", s, breakdown_);
    layernorm_backward(ex, {T, H}, c.h.data(), dln.data(), g2_.as<float>(), c.mean2.as<float>(), c.rstd2.as<float>(),
                       dh.data(), dg2_.as<float>(), db2_.as<float>(), t);
    axpy(ex, n, 1.f, dy, dh.data(), t);
  }
  {  // Attention (its W reads LN1's output: kept alive by the last task)
    ScopedRange r("attention.bwd", s, breakdown_);
    attn_.backward(c.attention, dh.data(), dln.data(), s, false, later);
    if (later) later->push_back([ln1 = std::make_shared<Buffer>(std::move(c.ln1))](const Stream&) {});
    reduce(dln.data());
  }
  {  // dx = dh + LN1's backward.
    ScopedRange r("ln.bwd", s, breakdown_);
    layernorm_backward(ex, {T, H}, c.x, dln.data(), g1_.as<float>(), c.mean1.as<float>(), c.rstd1.as<float>(), tmp.data(),
                       dg1_.as<float>(), db1_.as<float>(), t);
    dev_.copy(dx, dh.data(), xb, s);
    axpy(ex, n, 1.f, tmp.data(), dx, t);
  }
  for (Buffer* b : {&c.ln1, &c.mean1, &c.rstd1, &c.h, &c.ln2, &c.mean2, &c.rstd2, &c.z, &c.a}) b->release();
}

void TransformerBlock::backward_weights(BlockContext& c, const Stream& s) {
  for (auto& t : c.weight_tasks) t(s);
  c.weight_tasks.clear();  // stream-ordered: what they held goes back after their GEMMs
}

}  // namespace moebench
