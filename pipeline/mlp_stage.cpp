#include "pipeline/mlp_stage.h"
#include <stdexcept>
#include <string>
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "moe/init.h"
#include "runtime/range.h"

namespace moebench {

MlpStage::MlpStage(const MlpStageConfig& cfg, Device& dev, TrackingAllocator& alloc) : cfg_(cfg), dev_(dev), alloc_(alloc) {
  if (cfg.hidden < 1 || cfg.ffn < 1 || cfg.layers < 1)
    throw Error("MlpStage: hidden " + std::to_string(cfg.hidden) + ", ffn " + std::to_string(cfg.ffn) + " and layers " +
                std::to_string(cfg.layers) + " must be >= 1");
  // Gradients accumulate over micro-batches in the weights' type: fp32 keeps that exact.
  if (cfg.dtype != DType::f32) throw Error("MlpStage: only fp32 weights (16-bit ones need fp32 master gradients)");
  const std::size_t bytes = weights_per_kind() * 4;
  w1_ = alloc_.allocate(bytes, MemTag::model_states);
  w2_ = alloc_.allocate(bytes, MemTag::model_states);
  dw1_ = alloc_.allocate(bytes, MemTag::model_states);
  dw2_ = alloc_.allocate(bytes, MemTag::model_states);
}

const void* MlpStage::w(const Buffer& b, int layer, std::size_t per) const {
  return static_cast<const float*>(b.data()) + std::size_t(layer) * per;
}
void* MlpStage::w(Buffer& b, int layer, std::size_t per) { return static_cast<float*>(b.data()) + std::size_t(layer) * per; }

void MlpStage::init(std::uint64_t seed, const Stream& s) {
  const std::size_t per = std::size_t(cfg_.hidden) * cfg_.ffn;
  std::vector<std::vector<float>> host;  // alive until the copies have run
  for (int l = 0; l < cfg_.layers; ++l) {
    const std::uint64_t g = std::uint64_t(cfg_.first_layer + l);
    host.push_back(normal_vector(per, seed, 5000 + 2 * g, 0.05f));
    dev_.copy_to_device(w(w1_, l, per), host.back().data(), per * 4, s);
    host.push_back(normal_vector(per, seed, 5001 + 2 * g, 0.05f));
    dev_.copy_to_device(w(w2_, l, per), host.back().data(), per * 4, s);
  }
  zero_grad(s);
  s.synchronize();
}

void MlpStage::zero_grad(const Stream& s) {
  dev_.fill_zero(dw1_.data(), dw1_.bytes(), s);
  dev_.fill_zero(dw2_.data(), dw2_.bytes(), s);
}

void MlpStage::run_forward(Held& m, const Stream& s) {
  const int H = cfg_.hidden, F = cfg_.ffn, L = cfg_.layers;
  const std::size_t per = std::size_t(H) * F, xb = std::size_t(m.rows) * H * 4, hb = std::size_t(m.rows) * F * 4;
  const Exec ex = dev_.exec(s);
  m.x.resize(L);
  m.h.clear();
  m.h.resize(L);
  m.a.clear();
  m.a.resize(L);
  for (int l = 0; l < L; ++l) {
    m.h[l] = alloc_.allocate(hb, MemTag::activations, s);
    m.a[l] = alloc_.allocate(hb, MemTag::activations, s);
    gemm(ex, dense_gemm(false, false, m.rows, F, H, m.x[l].data(), w(w1_, l, per), m.h[l].data()));
    gelu_forward(ex, m.h[l].data(), m.a[l].data(), std::size_t(m.rows) * F, DType::f32);
    if (l + 1 < L) {  // the next block's input: x + a W2
      m.x[l + 1] = alloc_.allocate(xb, MemTag::activations, s);
      dev_.copy(m.x[l + 1].data(), m.x[l].data(), xb, s);
      gemm(ex, dense_gemm(false, false, m.rows, H, F, m.a[l].data(), w(w2_, l, per), m.x[l + 1].data(), DType::f32, 1.f, 1.f));
    }
  }
}

void MlpStage::forward(int micro, const void* x, void* y, int rows, const Stream& s) {
  if (held_.count(micro)) throw Error("MlpStage: micro-batch " + std::to_string(micro) + " ran forward twice");
  const int H = cfg_.hidden, F = cfg_.ffn, L = cfg_.layers;
  const std::size_t per = std::size_t(H) * F, xb = std::size_t(rows) * H * 4;
  Held& m = held_[micro];
  m.rows = rows;
  m.x.resize(1);
  m.x[0] = alloc_.allocate(xb, MemTag::activations, s);
  dev_.copy(m.x[0].data(), x, xb, s);
  run_forward(m, s);
  // The output: the last block's input plus its MLP.
  dev_.copy(y, m.x[L - 1].data(), xb, s);
  gemm(dev_.exec(s), dense_gemm(false, false, rows, H, F, m.a[L - 1].data(), w(w2_, L - 1, per), y, DType::f32, 1.f, 1.f));
  if (cfg_.recompute) {  // keep the stage input alone
    m.x.resize(1);
    m.h.clear();
    m.a.clear();
  }
}

void MlpStage::backward_input(int micro, const void* dy, void* dx, const Stream& s) {
  auto it = held_.find(micro);
  if (it == held_.end() || !it->second.dy.empty())
    throw Error("MlpStage: backward of micro-batch " + std::to_string(micro) + " without its forward, or twice");
  Held& m = it->second;
  if (cfg_.recompute) {
    ScopedRange r("pipe.recompute", s);
    run_forward(m, s);
  }
  const int H = cfg_.hidden, F = cfg_.ffn, L = cfg_.layers;
  const std::size_t per = std::size_t(H) * F, xb = std::size_t(m.rows) * H * 4, hb = std::size_t(m.rows) * F * 4;
  const Exec ex = dev_.exec(s);
  m.dy.clear();
  m.dy.resize(L);
  m.dh.clear();
  m.dh.resize(L);
  m.dy[L - 1] = alloc_.allocate(xb, MemTag::activations, s);
  dev_.copy(m.dy[L - 1].data(), dy, xb, s);
  for (int l = L - 1; l >= 0; --l) {
    // dh = GeLU'(h) * (dy W2^T); the block's input gradient dy + dh W1^T.
    m.dh[l] = alloc_.allocate(hb, MemTag::activations, s);
    gemm(ex, dense_gemm(false, true, m.rows, F, H, m.dy[l].data(), w(w2_, l, per), m.dh[l].data()));
    gelu_backward(ex, m.h[l].data(), m.dh[l].data(), m.dh[l].data(), std::size_t(m.rows) * F, DType::f32);
    void* out = dx;
    if (l > 0) {
      m.dy[l - 1] = alloc_.allocate(xb, MemTag::activations, s);
      out = m.dy[l - 1].data();
    }
    dev_.copy(out, m.dy[l].data(), xb, s);
    gemm(ex, dense_gemm(false, true, m.rows, H, F, m.dh[l].data(), w(w1_, l, per), out, DType::f32, 1.f, 1.f));
  }
  m.h.clear();  // W needs x, a, dy and dh
}

void MlpStage::backward_weight(int micro, const Stream& s) {
  auto it = held_.find(micro);
  if (it == held_.end() || it->second.dy.empty())
    throw Error("MlpStage: weight gradient of micro-batch " + std::to_string(micro) + " before its input gradient");
  Held& m = it->second;
  const int H = cfg_.hidden, F = cfg_.ffn;
  const std::size_t per = std::size_t(H) * F;
  const Exec ex = dev_.exec(s);
  for (int l = 0; l < cfg_.layers; ++l) {
    gemm(ex, dense_gemm(true, false, F, H, m.rows, m.a[l].data(), m.dy[l].data(), w(dw2_, l, per), DType::f32, 1.f, 1.f));
    gemm(ex, dense_gemm(true, false, H, F, m.rows, m.x[l].data(), m.dh[l].data(), w(dw1_, l, per), DType::f32, 1.f, 1.f));
  }
  held_.erase(it);  // stream-ordered: the buffers return to the pool after these GEMMs
}

}  // namespace moebench
