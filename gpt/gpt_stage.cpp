#include "gpt/gpt_stage.h"
#include <string>
#include "kernels/axpy.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "moe/init.h"
#include "models/layout_rules.h"
#include "gpt/typed_upload.h"

namespace moebench {

GptConfig gpt_config(const ModelShape& shape, DType dtype) {
  GptConfig c;
  c.vocab = shape.vocab;
  c.seq = shape.seq;
  c.hidden = shape.hidden;
  c.heads = shape.heads;
  c.ffn = shape.ffn;
  c.layers = shape.layers;
  c.dtype = dtype;
  if (shape.has_moe()) {
    c.moe_every = shape.moe_every;
    c.moe.hidden = shape.hidden;
    c.moe.dtype = dtype;  // what the blocks build; the bench validates this config first
    c.moe.ffn = shape.ffn;
    c.moe.experts = shape.experts;
    c.moe.top_k = shape.top_k;
    c.moe.prototypes = shape.prototypes;
    if (shape.capacity_factor > 0)
      c.moe.capacity_factor = shape.capacity_factor;
    else
      c.moe.capacity_factor = std::nullopt;  // dropless
  }
  return c;
}

std::optional<std::string> GptStage::validate(const GptConfig& cfg, int stages, int tp_size) {
  if (auto e = stage_split_error(cfg.layers, cfg.seq, cfg.vocab, stages)) return e;
  if (!is_float(cfg.dtype))
    return "--dtype: " + std::string(dtype_name(cfg.dtype)) + "; allowed: fp32, fp16 and bf16";
  if (cfg.moe_every > 0 && cfg.moe.gate == GateImpl::paper && cfg.dtype != DType::f32)
    return "--gate paper: its dense dispatch and combine tensors are fp32; allowed --dtype fp32";
  return block_split_error(cfg.hidden, cfg.heads, cfg.ffn, tp_size);
}

GptStage::GptStage(const GptConfig& cfg, int stage, int stages, Device& dev, TrackingAllocator& alloc, Communicator* tp,
                   const DispatcherFactory& dispatcher)
    : cfg_(cfg), stage_(stage), stages_(stages), dev_(dev), alloc_(alloc) {
  if (auto e = validate(cfg, stages, tp ? tp->size() : 1)) throw Error("GptStage: " + *e);
  layers_ = cfg.layers / stages;
  first_layer_ = stage * layers_;
  const std::size_t H = cfg.hidden, es = dtype_size(cfg.dtype);
  if (first() || last())
    for (Buffer* b : {&table_, &dtable_}) *b = alloc_.allocate(std::size_t(cfg.vocab) * H * es, MemTag::model_states);
  if (first())
    for (Buffer* b : {&positions_, &dpositions_}) *b = alloc_.allocate(std::size_t(cfg.seq) * H * es, MemTag::model_states);
  if (last())
    for (Buffer* b : {&gf_, &bf_, &dgf_, &dbf_}) *b = alloc_.allocate(H * 4, MemTag::model_states);
  for (int l = 0; l < layers_; ++l) {
    TransformerBlockConfig b{cfg.hidden, cfg.heads, cfg.ffn, first_layer_ + l, std::nullopt, cfg.dtype, cfg.attention,
                             cfg.attention_panel_rows};
    if (cfg.is_moe(first_layer_ + l)) b.moe = cfg.moe;
    blocks_.push_back(std::make_unique<TransformerBlock>(b, dev, alloc, tp, dispatcher));
  }
}

void GptStage::init(std::uint64_t seed, const Stream& s) {
  const std::size_t H = cfg_.hidden;
  const std::vector<float> ones(H, 1.f);
  const auto table = normal_vector(std::size_t(cfg_.vocab) * H, seed, 300000, cfg_.token_std);
  const auto pos = normal_vector(std::size_t(cfg_.seq) * H, seed, 300001, cfg_.position_std);
  if (table_) upload_as(dev_, table_.data(), table, cfg_.dtype, s);
  if (positions_) upload_as(dev_, positions_.data(), pos, cfg_.dtype, s);
  if (gf_) {
    dev_.copy_to_device(gf_.data(), ones.data(), H * 4, s);
    dev_.fill_zero(bf_.data(), bf_.bytes(), s);
  }
  for (auto& b : blocks_) b->init(seed, s);
  zero_grad(s);
  s.synchronize();  // the host vectors go out of scope
}

void GptStage::zero_grad(const Stream& s) {
  for (Buffer* b : {&dtable_, &dpositions_, &dgf_, &dbf_})
    if (*b) dev_.fill_zero(b->data(), b->bytes(), s);
  for (auto& b : blocks_) b->zero_grad(s);
  losses_.clear();
}

void GptStage::set_batch(std::vector<const std::int32_t*> tokens, std::vector<const std::int32_t*> targets, int sequences,
                         float grad_scale) {
  tokens_ = std::move(tokens);
  targets_ = std::move(targets);
  sequences_ = sequences;
  grad_scale_ = grad_scale;
  micro_.clear();
  micro_.resize(std::max(tokens_.size(), targets_.size()));
}

std::vector<std::pair<Buffer*, Buffer*>> GptStage::parameters() {
  std::vector<std::pair<Buffer*, Buffer*>> out;
  if (first()) {
    out.push_back({&table_, &dtable_});
    out.push_back({&positions_, &dpositions_});
  }
  for (auto& b : blocks_)
    for (auto& p : b->parameters()) out.push_back(p);
  if (last()) {
    out.push_back({&gf_, &dgf_});
    out.push_back({&bf_, &dbf_});
    if (!first()) out.push_back({&table_, &dtable_});
  }
  return out;
}

std::vector<TrainedParameter> GptStage::trained_parameters() {
  std::vector<TrainedParameter> out;
  if (first()) {
    out.push_back({&table_, &dtable_, cfg_.dtype});
    out.push_back({&positions_, &dpositions_, cfg_.dtype});
  }
  for (auto& b : blocks_)
    for (const TrainedParameter& p : b->trained_parameters()) out.push_back(p);
  if (last()) {
    out.push_back({&gf_, &dgf_, DType::f32});
    out.push_back({&bf_, &dbf_, DType::f32});
    if (!first()) out.push_back({&table_, &dtable_, cfg_.dtype});
  }
  return out;
}

bool GptStage::reads_host_counts() const {
  for (const auto& b : blocks_)
    if (b->reads_host_counts()) return true;
  return false;
}

std::vector<std::pair<Buffer*, Buffer*>> GptStage::moe_parameters() {
  std::vector<std::pair<Buffer*, Buffer*>> out;
  for (auto& b : blocks_)
    for (auto& p : b->moe_parameters()) out.push_back(p);
  return out;
}

void GptStage::forward(int micro, const void* x, void* y, int rows, const Stream& s) {
  const int H = cfg_.hidden, V = cfg_.vocab, S = cfg_.seq, T = sequences_ * S;
  if (rows != T || micro < 0 || micro >= int(micro_.size()))
    throw Error("GptStage: micro-batch " + std::to_string(micro) + " of " + std::to_string(rows) + " rows; set_batch gave " +
                std::to_string(micro_.size()) + " of " + std::to_string(T));
  const DType t = cfg_.dtype;
  const std::size_t es = dtype_size(t), xb = std::size_t(T) * H * es;
  const Exec ex = dev_.exec(s);
  ScopedRange whole("model.fwd", s, breakdown_);
  Micro& m = micro_[micro];
  m.xs.clear();
  m.xs.resize(layers_ + 1);
  m.blocks.clear();
  m.blocks.resize(layers_);
  m.xs[0] = alloc_.allocate(xb, MemTag::activations, s);
  if (first()) {
    ScopedRange r("embed.fwd", s, breakdown_);
    embedding_forward(ex, {T, S, H, V}, tokens_.at(micro), table_.data(), positions_.data(), m.xs[0].data(), t);
  } else {
    dev_.copy(m.xs[0].data(), x, xb, s);
  }
  run_blocks(m, s);
  if (!last()) {
    dev_.copy(y, m.xs[layers_].data(), xb, s);
    if (recompute_) forget_blocks(m);
    return;
  }
  // Final LayerNorm, logits through the tied embedding, the loss and its gradient in place.
  ScopedRange head("head.fwd", s, breakdown_);
  const LayerNormShape ln{T, H};
  m.lnf = alloc_.allocate(xb, MemTag::activations, s);
  m.mean = alloc_.allocate(std::size_t(T) * 4, MemTag::activations, s);
  m.rstd = alloc_.allocate(std::size_t(T) * 4, MemTag::activations, s);
  layernorm_forward(ex, ln, m.xs[layers_].data(), gf_.as<float>(), bf_.as<float>(), m.lnf.data(), m.mean.as<float>(),
                    m.rstd.as<float>(), t);
  m.dlogits = alloc_.allocate(std::size_t(T) * V * es, MemTag::activations, s);
  Buffer& losses = losses_.emplace_back(alloc_.allocate(std::size_t(T) * 4, MemTag::temporary, s));
  gemm(ex, dense_gemm(false, true, T, V, H, m.lnf.data(), table_.data(), m.dlogits.data(), t));
  cross_entropy(ex, {T, V, grad_scale_}, m.dlogits.data(), targets_.at(micro), losses.as<float>(), m.dlogits.data(), t);
  if (recompute_) {  // the final LayerNorm is recomputed with the blocks
    forget_blocks(m);
    m.lnf.release();
    m.mean.release();
    m.rstd.release();
  }
}

void GptStage::run_blocks(Micro& m, const Stream& s) {
  const std::size_t xb = std::size_t(sequences_) * cfg_.seq * cfg_.hidden * dtype_size(cfg_.dtype);
  m.expert_rows = m.expert_computed_rows = 0;
  for (int l = 0; l < layers_; ++l) {
    m.xs[l + 1] = alloc_.allocate(xb, MemTag::activations, s);
    m.blocks[l] = blocks_[l]->forward(m.xs[l].data(), m.xs[l + 1].data(), sequences_, cfg_.seq, s);
    if (m.blocks[l].moe.dispatch) {
      for (int r : m.blocks[l].moe.dispatch->rows_per_expert) m.expert_rows += r;
      m.expert_computed_rows += (long long)m.blocks[l].moe.experts.computed_rows();
    }
  }
}

void GptStage::forget_blocks(Micro& m) {  // all but the stage's input (stream-ordered release)
  for (int l = 0; l < layers_; ++l) {
    m.blocks[l] = BlockContext{};
    m.xs[l + 1].release();
  }
}

void GptStage::backward_input(int micro, const void* dy, void* dx, const Stream& s) {
  const int H = cfg_.hidden, V = cfg_.vocab, S = cfg_.seq, T = sequences_ * S;
  const DType t = cfg_.dtype;
  const std::size_t xb = std::size_t(T) * H * dtype_size(t);
  const Exec ex = dev_.exec(s);
  Micro& m = micro_.at(micro);
  ScopedRange whole("model.bwd", s, breakdown_);
  if (recompute_) {
    ScopedRange r("pipe.recompute", s, breakdown_);
    run_blocks(m, s);
    if (last()) {
      m.lnf = alloc_.allocate(xb, MemTag::activations, s);
      m.mean = alloc_.allocate(std::size_t(T) * 4, MemTag::activations, s);
      m.rstd = alloc_.allocate(std::size_t(T) * 4, MemTag::activations, s);
      layernorm_forward(ex, {T, H}, m.xs[layers_].data(), gf_.as<float>(), bf_.as<float>(), m.lnf.data(), m.mean.as<float>(),
                        m.rstd.as<float>(), t);
    }
  }
  Buffer grad = alloc_.allocate(xb, MemTag::temporary, s), next = alloc_.allocate(xb, MemTag::temporary, s);
  if (last()) {  // dLNf = dlogits E, then LNf's backward (W: dE += dlogits^T LNf)
    ScopedRange r("head.bwd", s, breakdown_);
    gemm(ex, dense_gemm(false, false, T, H, V, m.dlogits.data(), table_.data(), next.data(), t));
    layernorm_backward(ex, {T, H}, m.xs[layers_].data(), next.data(), gf_.as<float>(), m.mean.as<float>(),
                       m.rstd.as<float>(), grad.data(), dgf_.as<float>(), dbf_.as<float>(), t);
  } else {
    dev_.copy(grad.data(), dy, xb, s);
  }
  for (int l = layers_ - 1; l >= 0; --l) {
    blocks_[l]->backward(m.blocks[l], grad.data(), next.data(), s, /*defer=*/true);
    std::swap(grad, next);
  }
  if (first()) {
    ScopedRange r("embed.bwd", s, breakdown_);
    embedding_backward(ex, {T, S, H, V}, tokens_.at(micro), grad.data(), dtable_.data(), dpositions_.data(), t);
  } else {
    dev_.copy(dx, grad.data(), xb, s);
  }
  // Stream-ordered: what W does not need goes back to the pool after these ops (W keeps the
  // last stage's dlogits and LNf output for the output layer's weight gradient).
  m.xs.clear();
  m.mean.release();
  m.rstd.release();
}

void GptStage::backward_weight(int micro, const Stream& s) {
  Micro& m = micro_.at(micro);
  ScopedRange whole("model.wgrad", s, breakdown_);
  if (last()) {  // the tied output layer: dE += dlogits^T LNf
    ScopedRange r("head.wgrad", s, breakdown_);
    const int H = cfg_.hidden, V = cfg_.vocab, T = sequences_ * cfg_.seq;
    gemm(dev_.exec(s), dense_gemm(true, false, V, H, T, m.dlogits.data(), m.lnf.data(), dtable_.data(), cfg_.dtype, 1.f, 1.f));
  }
  for (int l = 0; l < layers_; ++l) blocks_[l]->backward_weights(m.blocks[l], s);
  const long long rows = m.expert_rows, computed = m.expert_computed_rows;  // kept: they answer after the backward
  m = Micro{};
  m.expert_rows = rows;
  m.expert_computed_rows = computed;
}

void GptStage::set_breakdown(Breakdown* b) {
  breakdown_ = b;
  for (auto& block : blocks_) block->set_breakdown(b);
}

long long GptStage::expert_rows(int micro) const {
  if (micro < 0 || micro >= int(micro_.size())) throw Error("GptStage: no micro-batch " + std::to_string(micro));
  return micro_[micro].expert_rows;
}

long long GptStage::expert_computed_rows(int micro) const {
  if (micro < 0 || micro >= int(micro_.size())) throw Error("GptStage: no micro-batch " + std::to_string(micro));
  return micro_[micro].expert_computed_rows;
}

double GptStage::loss_sum(const Stream& s) {
  if (!last()) throw Error("GptStage: the loss is on the last stage");
  std::vector<std::vector<float>> host;
  for (const Buffer& b : losses_) {
    host.emplace_back(b.bytes() / 4);
    dev_.copy_to_host(host.back().data(), b.data(), b.bytes(), s);
  }
  s.synchronize();
  double sum = 0;
  for (const auto& h : host)
    for (float v : h) sum += v;
  return sum;
}

void GptStage::sync_tied_embedding(Communicator& pipeline, const Stream& s) {
  if (stages_ == 1 || !(first() || last())) return;
  const int peer = first() ? stages_ - 1 : 0;
  const std::size_t n = dtable_.bytes() / dtype_size(cfg_.dtype);
  Buffer theirs = alloc_.allocate(dtable_.bytes(), MemTag::temporary, s);
  pipeline.send_recv(dtable_.data(), peer, theirs.data(), peer, n, cfg_.dtype, s);
  axpy(dev_.exec(s), n, 1.f, theirs.data(), dtable_.data(), cfg_.dtype);
}

}  // namespace moebench
