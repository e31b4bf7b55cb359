#include "moe/routing_slice.h"
#include <string>

namespace moebench {

RoutingOnHost routing_on_host(const Device& dev, const Routing& r, const Stream& s) {
  const std::size_t n = std::size_t(r.tokens()) * r.slots();
  RoutingOnHost h;
  h.expert.resize(n);
  h.position.resize(n);
  dev.copy_to_host(h.expert.data(), r.expert.data(), n * 4, s);
  dev.copy_to_host(h.position.data(), r.position.data(), n * 4, s);
  return h;
}

namespace {

// A routing of `tokens` tokens shaped like `whole`, with its own expert, position and weight
// slots copied from `whole`'s slots starting at token `first`.
Routing shaped_like(const Device& dev, TrackingAllocator& alloc, const Routing& whole, int first, int tokens,
                    const Stream& s) {
  Routing r;
  r.shape = whole.shape;
  r.shape.gate.tokens = tokens;
  const std::size_t n = std::size_t(tokens) * whole.slots(), off = std::size_t(first) * whole.slots();
  r.expert = alloc.allocate(std::max<std::size_t>(n, 1) * 4, MemTag::activations, s);
  r.position = alloc.allocate(std::max<std::size_t>(n, 1) * 4, MemTag::activations, s);
  r.weight = alloc.allocate(std::max<std::size_t>(n, 1) * 4, MemTag::activations, s);
  dev.copy(r.expert.data(), whole.expert.as<std::int32_t>() + off, n * 4, s);
  dev.copy(r.weight.data(), whole.weight.as<float>() + off, n * 4, s);
  return r;
}

}  // namespace

Routing token_slice(const Device& dev, TrackingAllocator& alloc, HostStaging& upload, const Routing& whole,
                    const RoutingOnHost& host, int t0, int t1, const Stream& s) {
  const int T = whole.tokens();
  if (whole.groups() != 1)
    throw Error("a token slice needs a routing with one capacity group, this one has " + std::to_string(whole.groups()));
  if (t0 < 0 || t1 <= t0 || t1 > T)
    throw Error("token slice [" + std::to_string(t0) + ", " + std::to_string(t1) + ") is not inside the " +
                std::to_string(T) + " tokens");
  const GateShape& g = whole.shape.gate;
  const int S = g.slots(), E = g.experts;
  Routing r = shaped_like(dev, alloc, whole, t0, t1 - t0, s);
  r.shape.groups = 1;
  std::vector<std::int32_t> position(std::size_t(t1 - t0) * S, -1), next(E, 0);
  r.routed.assign(E, 0);
  for (int j = 0; j < g.k; ++j)  // the gate's priority order: choice, token, prototype
    for (int t = t0; t < t1; ++t)
      for (int z = 0; z < g.prototypes; ++z) {
        const std::size_t slot = std::size_t(t) * S + std::size_t(z) * g.k + j;
        const int e = host.expert[slot];
        ++r.routed[e];
        if (host.position[slot] >= 0) position[slot - std::size_t(t0) * S] = next[e]++;
      }
  r.kept = next;
  upload.upload(r.position.data(), position.data(), position.size() * 4, s);
  return r;
}

Routing expert_slice(const Device& dev, TrackingAllocator& alloc, HostStaging& upload, const Routing& whole,
                     const RoutingOnHost& host, int e0, int e1, const Stream& s) {
  const int E = whole.shape.gate.experts, G = whole.groups();
  if (e0 < 0 || e1 <= e0 || e1 > E)
    throw Error("expert slice [" + std::to_string(e0) + ", " + std::to_string(e1) + ") is not inside the " +
                std::to_string(E) + " experts");
  Routing r = shaped_like(dev, alloc, whole, 0, whole.tokens(), s);
  r.expert_slice = true;
  std::vector<std::int32_t> position(host.position.size());
  for (std::size_t i = 0; i < position.size(); ++i)
    position[i] = host.expert[i] >= e0 && host.expert[i] < e1 ? host.position[i] : -1;
  upload.upload(r.position.data(), position.data(), position.size() * 4, s);
  r.routed.assign(std::size_t(G) * E, 0);
  r.kept.assign(std::size_t(G) * E, 0);
  for (int gr = 0; gr < G; ++gr)
    for (int e = e0; e < e1; ++e) {
      r.routed[std::size_t(gr) * E + e] = whole.routed[std::size_t(gr) * E + e];
      r.kept[std::size_t(gr) * E + e] = whole.kept[std::size_t(gr) * E + e];
    }
  return r;
}

}  // namespace moebench
