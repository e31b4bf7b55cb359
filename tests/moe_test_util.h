// A CPU MoE layer on host data, for tests: build, run forward/backward, read results back.
#pragma once
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <vector>
#include "kernels/convert.h"
#include "moe/init.h"
#include "moe/moe_layer.h"

namespace moebench::testing_util {

// n draws of N(0, sd^2), the same for the same seed.
inline std::vector<float> normals(std::size_t n, unsigned seed, float sd = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// A layer of `cfg` on `dev` and `alloc`, its dispatcher made by factory(env) (the config is copied
// into the layer first), its weights drawn from `seed`.
template <class Factory>
std::unique_ptr<MoELayer> make_test_layer(const MoEConfig& cfg, Device& dev, TrackingAllocator& alloc, Factory&& factory,
                                          std::uint64_t seed) {
  MoEConfig c = cfg;
  DispatcherEnv env{c, dev, alloc};
  auto d = factory(env);
  auto layer = std::make_unique<MoELayer>(c, dev, alloc, std::move(d));
  layer->init(seed, dev.default_stream());
  return layer;
}

struct CpuLayer {
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc{Backend::cpu};
  std::unique_ptr<MoELayer> layer;
  std::optional<MoEContext> ctx;  // of the last forward
  std::vector<float> y, dx;

  // factory(env) makes the dispatcher (make_test_layer).
  template <class Factory>
  CpuLayer(const MoEConfig& cfg, Factory&& factory, std::uint64_t seed = 7)
      : layer(make_test_layer(cfg, dev, alloc, std::forward<Factory>(factory), seed)) {}
  const MoEConfig& cfg() const { return layer->config(); }
  void forward(const std::vector<float>& x) {
    x_ = x;
    y.assign(x.size(), 0.f);
    ctx.reset();
    ctx = layer->forward(x_.data(), int(x.size() / cfg().hidden), y.data(), dev.default_stream());
  }
  // The gradients of the last forward alone (the layer's accumulated gradients are cleared first).
  void backward(const std::vector<float>& dy) {
    dx.assign(dy.size(), 0.f);
    layer->zero_grad(dev.default_stream());
    layer->backward(*ctx, dy.data(), dx.data(), dev.default_stream());
  }
  const Routing& routing() const { return ctx->routing; }
  LoadStats load() const { return layer->load(*ctx); }
  double aux_loss() {  // the forward left it on the device
    layer->read_counts(*ctx, dev.default_stream());
    return ctx->routing.aux_loss();
  }
  float* gate_w() { return layer->gate().weight().as<float>(); }
  float* gate_g() { return layer->gate().grad().as<float>(); }
  float* w1() { return layer->experts().w1().as<float>(); }
  float* w2() { return layer->experts().w2().as<float>(); }
  float* w1_g() { return layer->experts().w1_grad().as<float>(); }
  float* w2_g() { return layer->experts().w2_grad().as<float>(); }
  std::size_t expert_weights() const { return std::size_t(cfg().hidden) * cfg().ffn; }
  std::vector<std::int32_t> slots(const Buffer& b) const {
    const std::size_t n = std::size_t(routing().tokens()) * routing().slots();
    return std::vector<std::int32_t>(b.as<std::int32_t>(), b.as<std::int32_t>() + n);
  }
  std::vector<float> x_;
};

// fp16 / bf16 host values as the bits both backends store, and back; a host buffer of `t` (fp32
// or 16-bit) as fp32 values.
inline std::vector<std::uint16_t> bits16(DType t, const std::vector<float>& v) {
  std::vector<std::uint16_t> b(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b[i] = to_bits16(t, v[i]);
  return b;
}
inline std::vector<float> widen16(DType t, const void* p, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = from_bits16(t, static_cast<const std::uint16_t*>(p)[i]);
  return v;
}
inline std::vector<float> host_values(const Buffer& b, DType t) {
  const std::size_t n = b.bytes() / dtype_size(t);
  if (t == DType::f32) return std::vector<float>(b.as<float>(), b.as<float>() + n);
  return widen16(t, b.data(), n);
}

// A CPU MoE layer on fp16 or bf16 data (held as their bits, as both backends store them), for
// tests against CpuLayer in fp32 on the same rounded values: results widened back to fp32.
struct CpuLayer16 {
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc{Backend::cpu};
  std::unique_ptr<MoELayer> layer;
  std::optional<MoEContext> ctx;
  DType t;
  std::vector<std::uint16_t> x16, y16, dy16, dx16;
  std::vector<float> y, dx;

  template <class Factory>
  CpuLayer16(const MoEConfig& cfg, Factory&& factory, std::uint64_t seed = 7)
      : layer(make_test_layer(cfg, dev, alloc, std::forward<Factory>(factory), seed)), t(cfg.dtype) {}
  void forward(const std::vector<float>& x) {
    x16 = bits16(t, x);
    y16.assign(x.size(), 0);
    ctx.reset();
    ctx = layer->forward(x16.data(), int(x.size() / layer->config().hidden), y16.data(), dev.default_stream());
    dev.default_stream().synchronize();
    y = widen16(t, y16.data(), y16.size());
  }
  void backward(const std::vector<float>& dy) {
    dy16 = bits16(t, dy);
    dx16.assign(dy.size(), 0);
    layer->zero_grad(dev.default_stream());
    layer->backward(*ctx, dy16.data(), dx16.data(), dev.default_stream());
    dev.default_stream().synchronize();
    dx = widen16(t, dx16.data(), dx16.size());
  }
  std::vector<float> w1_g() { return host_values(layer->experts().w1_grad(), t); }
  std::vector<float> w2_g() { return host_values(layer->experts().w2_grad(), t); }
  std::size_t expert_values() const { return layer->experts().w1().bytes() / 2; }
};

// ||got - want|| / ||want||; NaN anywhere fails.
// The relative l2 error a computation storing its tensors in the 16-bit type `t` may show
// against fp32 on the same rounded inputs, from the type and the computation's shape alone:
// each of the `stores` roundings to `t` on the longest chain of ops that leads to a tensor has a
// relative error of at most u (t's unit roundoff, half its epsilon: 2^-8 for bf16, 2^-11 for
// fp16), spread evenly (RMS u / sqrt 3) and independent from one store to the next, so n of them
// add up to u sqrt(n / 3); an fp32 sum of `reduction` terms adds at most reduction * 2^-24. The
// margin of 5 covers the growth of those errors through GEMMs and GeLU's derivative and a small
// tensor's sampling of them (a wrong tensor is off by far more).
inline double sixteen_bit_tolerance(DType t, int stores, int reduction) {
  const double u = t == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  return 5.0 * u * std::sqrt(stores / 3.0) + reduction * std::ldexp(1.0, -24);
}

// ||got - want|| / ||want|| in double, against a float or a double reference; NaN anywhere fails.
template <class Want>
double rel_l2(const float* got, const Want* want, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  return rel_l2(got.data(), want.data(), got.size());
}

// The single-rank dispatcher, as the factory a layer takes.
inline std::unique_ptr<TokenDispatcher> local_dispatcher(const DispatcherEnv& env) { return make_local_dispatcher(env); }

// The tests' layer: small (h 16, f 24 unless given), dropless, the fused gate; each test sets the
// rest.
inline MoEConfig test_moe_config(int experts, int prototypes, int top_k, int hidden = 16, int ffn = 24) {
  MoEConfig c;
  c.hidden = hidden;
  c.ffn = ffn;
  c.experts = experts;
  c.prototypes = prototypes;
  c.top_k = top_k;
  return c;
}

// The layer the multi-rank tests share: 8 experts (for 1, 2, 4 ranks), two prototypes of top-2
// and capacity drops, so routing, slots and dropping are all exercised.
inline MoEConfig multi_rank_test_config() {
  MoEConfig c = test_moe_config(8, 2, 2);
  c.capacity_factor = 1.25;
  c.aux_coef = 0.1f;
  return c;
}

inline std::vector<float> tokens(int count, int hidden, std::uint64_t seed, int first_token = 0) {
  return normal_vector(std::size_t(count) * hidden, seed, 77, 1.f, std::size_t(first_token) * hidden);
}

// `count` token ids in [0, vocab), the same for a seed on every rank.
inline std::vector<std::int32_t> token_ids(int count, int vocab, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<std::int32_t> t(count);
  for (auto& x : t) x = std::int32_t(g() % unsigned(vocab));
  return t;
}

// max |a - b| / (1 + max |b|); infinite where either holds a NaN or an infinity.
inline double rel_diff(const float* a, const float* b, std::size_t n) {
  double d = 0, m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    d = std::max(d, std::fabs(double(a[i]) - b[i]));
    m = std::max(m, std::fabs(double(b[i])));
  }
  return d / (1.0 + m);
}

}  // namespace moebench::testing_util
