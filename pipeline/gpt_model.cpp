#include "pipeline/gpt_model.h"
#include <string>
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "moe/init.h"

namespace moebench {

GptModel::GptModel(const GptConfig& cfg, Device& dev, TrackingAllocator& alloc) : cfg_(cfg), dev_(dev), alloc_(alloc) {
  if (cfg.vocab < 1 || cfg.seq < 1 || cfg.layers < 1)
    throw Error("GptModel: vocabulary " + std::to_string(cfg.vocab) + ", seq " + std::to_string(cfg.seq) + " and layers " +
                std::to_string(cfg.layers) + " must be >= 1");
  const std::size_t H = cfg.hidden;
  for (Buffer* b : {&table_, &dtable_}) *b = alloc_.allocate(std::size_t(cfg.vocab) * H * 4, MemTag::model_states);
  for (Buffer* b : {&positions_, &dpositions_}) *b = alloc_.allocate(std::size_t(cfg.seq) * H * 4, MemTag::model_states);
  for (Buffer* b : {&gf_, &bf_, &dgf_, &dbf_}) *b = alloc_.allocate(H * 4, MemTag::model_states);
  for (int l = 0; l < cfg.layers; ++l)
    blocks_.push_back(std::make_unique<TransformerBlock>(TransformerBlockConfig{cfg.hidden, cfg.heads, cfg.ffn, l}, dev, alloc));
}

void GptModel::init(std::uint64_t seed, const Stream& s) {
  const std::size_t H = cfg_.hidden;
  const auto table = normal_vector(std::size_t(cfg_.vocab) * H, seed, 300000, 0.5f);
  const auto pos = normal_vector(std::size_t(cfg_.seq) * H, seed, 300001, 0.1f);
  const std::vector<float> ones(H, 1.f);
  dev_.copy_to_device(table_.data(), table.data(), table.size() * 4, s);
  dev_.copy_to_device(positions_.data(), pos.data(), pos.size() * 4, s);
  dev_.copy_to_device(gf_.data(), ones.data(), H * 4, s);
  dev_.fill_zero(bf_.data(), bf_.bytes(), s);
  for (auto& b : blocks_) b->init(seed, s);
  zero_grad(s);
  s.synchronize();  // the host vectors go out of scope
}

void GptModel::zero_grad(const Stream& s) {
  for (Buffer* b : {&dtable_, &dpositions_, &dgf_, &dbf_}) dev_.fill_zero(b->data(), b->bytes(), s);
  for (auto& b : blocks_) b->zero_grad(s);
}

std::vector<std::pair<Buffer*, Buffer*>> GptModel::parameters() {
  std::vector<std::pair<Buffer*, Buffer*>> out = {{&table_, &dtable_}, {&positions_, &dpositions_}};
  for (auto& b : blocks_)
    for (auto& p : b->parameters()) out.push_back(p);
  out.push_back({&gf_, &dgf_});
  out.push_back({&bf_, &dbf_});
  return out;
}

double GptModel::forward_backward(const std::int32_t* tokens, const std::int32_t* targets, int sequences, float grad_scale,
                                  const Stream& s) {
  const int H = cfg_.hidden, V = cfg_.vocab, S = cfg_.seq, T = sequences * S, L = cfg_.layers;
  const std::size_t xb = std::size_t(T) * H * 4;
  const Exec ex = dev_.exec(s);
  std::vector<Buffer> xs(L + 1);
  std::vector<BlockContext> ctx(L);
  xs[0] = alloc_.allocate(xb, MemTag::activations, s);
  embedding_forward(ex, {T, S, H, V}, tokens, table_.as<float>(), positions_.as<float>(), xs[0].as<float>());
  for (int l = 0; l < L; ++l) {
    xs[l + 1] = alloc_.allocate(xb, MemTag::activations, s);
    ctx[l] = blocks_[l]->forward(xs[l].data(), xs[l + 1].data(), sequences, S, s);
  }
  Buffer lnf = alloc_.allocate(xb, MemTag::activations, s), mean = alloc_.allocate(std::size_t(T) * 4, MemTag::activations, s),
         rstd = alloc_.allocate(std::size_t(T) * 4, MemTag::activations, s);
  const LayerNormShape ln{T, H};
  layernorm_forward(ex, ln, xs[L].data(), gf_.as<float>(), bf_.as<float>(), lnf.data(), mean.as<float>(), rstd.as<float>(),
                    DType::f32);
  // Logits through the tied embedding, the loss and its gradient in place.
  Buffer logits = alloc_.allocate(std::size_t(T) * V * 4, MemTag::activations, s);
  Buffer losses = alloc_.allocate(std::size_t(T) * 4, MemTag::temporary, s);
  gemm(ex, dense_gemm(false, true, T, V, H, lnf.data(), table_.data(), logits.data()));
  cross_entropy(ex, {T, V, grad_scale}, logits.data(), targets, losses.as<float>(), logits.data(), DType::f32);
  // Backward: dLNf = dlogits E; dE += dlogits^T LNf.
  Buffer dx = alloc_.allocate(xb, MemTag::temporary, s), dnext = alloc_.allocate(xb, MemTag::temporary, s);
  gemm(ex, dense_gemm(false, false, T, H, V, logits.data(), table_.data(), dnext.data()));
  gemm(ex, dense_gemm(true, false, V, H, T, logits.data(), lnf.data(), dtable_.data(), DType::f32, 1.f, 1.f));
  layernorm_backward(ex, ln, xs[L].data(), dnext.data(), gf_.as<float>(), mean.as<float>(), rstd.as<float>(), dx.data(),
                     dgf_.as<float>(), dbf_.as<float>(), DType::f32);
  for (int l = L - 1; l >= 0; --l) {
    blocks_[l]->backward(ctx[l], dx.data(), dnext.data(), s);
    std::swap(dx, dnext);
  }
  embedding_backward(ex, {T, S, H, V}, tokens, dx.as<float>(), dtable_.as<float>(), dpositions_.as<float>());
  std::vector<float> host(T);
  dev_.copy_to_host(host.data(), losses.data(), std::size_t(T) * 4, s);
  s.synchronize();
  double sum = 0;
  for (float v : host) sum += v;
  return sum;
}

}  // namespace moebench
