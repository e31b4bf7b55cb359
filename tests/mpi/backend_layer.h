// An MoE layer on the multi-rank suites' backend (test_backend.h), driven from host vectors: the
// tokens go to the device in the layer's dtype, and the output, the input gradient and the
// weights' gradients come back as fp32 host values. CpuLayer's interface, so a case written
// against CpuLayer runs on either backend; the single-rank reference stays a CpuLayer.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>
#include "moe_test_util.h"
#include "test_backend.h"

namespace moebench::test_backend {

struct BackendLayer {
  Device dev = open_device();
  TrackingAllocator alloc{dev.backend(), dev.default_stream()};
  std::unique_ptr<MoELayer> layer;
  std::optional<MoEContext> ctx;  // of the last forward
  std::vector<float> y, dx;

  template <class Factory>
  BackendLayer(const MoEConfig& cfg, Factory&& factory, std::uint64_t seed = 7)
      : layer(testing_util::make_test_layer(cfg, dev, alloc, std::forward<Factory>(factory), seed)) {}
  const MoEConfig& cfg() const { return layer->config(); }
  DType dtype() const { return cfg().dtype; }
  std::size_t expert_weights() const { return std::size_t(cfg().hidden) * cfg().ffn; }

  void forward(const std::vector<float>& x) {
    x_ = upload(x);
    y_ = upload(std::vector<float>(x.size(), 0.f));
    ctx.reset();
    ctx = layer->forward(x_.data(), int(x.size() / cfg().hidden), y_.data(), dev.default_stream());
    y = host_floats(dev, y_, dtype());
  }
  // The gradients of the last forward alone (the layer's accumulated gradients are cleared first).
  void backward(const std::vector<float>& dy) {
    dy_ = upload(dy);
    dx_ = upload(std::vector<float>(dy.size(), 0.f));
    layer->zero_grad(dev.default_stream());
    layer->backward(*ctx, dy_.data(), dx_.data(), dev.default_stream());
    dx = host_floats(dev, dx_, dtype());
    gate_g_ = host_floats(dev, layer->gate().grad());
    w1_g_ = host_floats(dev, layer->experts().w1_grad(), dtype());
    w2_g_ = host_floats(dev, layer->experts().w2_grad(), dtype());
  }
  double aux_loss() {  // the forward left it on the device
    layer->read_counts(*ctx, dev.default_stream());
    return ctx->routing.aux_loss();
  }
  // Read back by the last backward.
  const float* gate_g() const { return gate_g_.data(); }
  const float* w1_g() const { return w1_g_.data(); }
  const float* w2_g() const { return w2_g_.data(); }

 private:
  Buffer upload(const std::vector<float>& host) {
    const DType t = dtype();
    Buffer b = alloc.allocate(host.size() * dtype_size(t), MemTag::activations);
    if (t == DType::f32) {
      dev.copy_to_device(b.data(), host.data(), host.size() * 4, dev.default_stream());
    } else {
      const std::vector<std::uint16_t> bits = testing_util::bits16(t, host);
      dev.copy_to_device(b.data(), bits.data(), bits.size() * 2, dev.default_stream());
    }
    dev.default_stream().synchronize();  // the host vector may go before the copy runs
    return b;
  }
  Buffer x_, y_, dy_, dx_;
  std::vector<float> gate_g_, w1_g_, w2_g_;
};

}  // namespace moebench::test_backend
