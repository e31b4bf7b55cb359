#include "harness/layer_dump.h"
#include "harness/npy.h"
#include "runtime/host_copy.h"

namespace moebench {

void dump_layer_state(const std::string& base, Device& dev, TrackingAllocator& alloc, MoELayer& layer,
                      const MoEContext& step, const LayerIO& io) {
  const MoEConfig& c = layer.config();
  const std::size_t T = std::size_t(step.tokens), h = std::size_t(c.hidden), ff = std::size_t(c.ffn);
  const std::size_t L = std::size_t(layer.experts().count()), S = std::size_t(c.slots()), E = std::size_t(c.experts);
  auto f32 = [&](const void* p, std::size_t n, DType t) { return host_f32(dev, alloc, p, n, t); };
  auto i32 = [&](const Buffer& b, std::size_t n) {
    std::vector<std::int32_t> v(n);
    dev.copy_to_host(v.data(), b.data(), n * 4, dev.default_stream());
    return v;
  };
  write_npy(base + "x.npy", f32(io.x, T * h, c.dtype).data(), {T, h});
  write_npy(base + "y.npy", f32(io.y, T * h, c.dtype).data(), {T, h});
  write_npy(base + "dy.npy", f32(io.dy, T * h, c.dtype).data(), {T, h});
  write_npy(base + "dx.npy", f32(io.dx, T * h, c.dtype).data(), {T, h});
  write_npy(base + "gate_weight.npy", f32(layer.gate().weight().data(), h * E, DType::f32).data(), {h, E});
  write_npy(base + "gate_grad.npy", f32(layer.gate().grad().data(), h * E, DType::f32).data(), {h, E});
  write_npy(base + "w1.npy", f32(layer.experts().w1().data(), L * h * ff, c.dtype).data(), {L, h, ff});
  write_npy(base + "w2.npy", f32(layer.experts().w2().data(), L * ff * h, c.dtype).data(), {L, ff, h});
  write_npy(base + "w1_grad.npy", f32(layer.experts().w1_grad().data(), L * h * ff, c.dtype).data(), {L, h, ff});
  write_npy(base + "w2_grad.npy", f32(layer.experts().w2_grad().data(), L * ff * h, c.dtype).data(), {L, ff, h});
  const Routing& r = step.routing;
  const auto expert = i32(r.expert, T * S), position = i32(r.position, T * S);
  const auto weight = f32(r.weight.data(), T * S, DType::f32);
  std::vector<float> combine(T * S);  // what each slot's expert output is multiplied by (0: dropped)
  for (std::size_t i = 0; i < T * S; ++i) combine[i] = position[i] >= 0 ? weight[i] : 0.f;
  write_npy(base + "probs.npy", f32(r.probs.data(), T * E, DType::f32).data(), {T, E});
  write_npy(base + "route_expert.npy", expert.data(), {T, S});
  write_npy(base + "route_position.npy", position.data(), {T, S});
  write_npy(base + "route_weight.npy", weight.data(), {T, S});
  write_npy(base + "combine_weight.npy", combine.data(), {T, S});
  const float aux = float(r.aux_loss());  // the caller read the counts (MoELayer::read_counts)
  write_npy(base + "aux_loss.npy", &aux, {});
}

}  // namespace moebench
