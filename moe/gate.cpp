#include "moe/gate.h"
#include <algorithm>
#include <cmath>
#include "kernels/aux_loss.h"
#include "kernels/axpy.h"
#include "kernels/bf16_split.h"
#include "kernels/convert.h"
#include "kernels/gate_grads.h"
#include "kernels/gemm.h"
#include "kernels/looped_gating.h"
#include "kernels/routing.h"
#include "moe/init.h"

namespace moebench {

double coefficient_of_variation(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  if (mean == 0) return 0.0;
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / double(v.size())) / mean;
}

LoadStats load_stats(const std::vector<std::int32_t>& routed, const std::vector<std::int32_t>& kept, int experts) {
  LoadStats s;
  s.routed.assign(experts, 0.0);
  s.kept.assign(experts, 0.0);
  double total = 0, kept_total = 0;
  for (std::size_t i = 0; i < routed.size(); ++i) {
    s.routed[i % experts] += routed[i];
    s.kept[i % experts] += kept[i];
    total += routed[i];
    kept_total += kept[i];
  }
  s.cv = coefficient_of_variation(s.kept);
  s.dropped_fraction = total > 0 ? (total - kept_total) / total : 0.0;
  return s;
}

Gate::Gate(const MoEConfig& cfg, Device& dev, TrackingAllocator& alloc)
    : cfg_(cfg), dev_(dev), alloc_(alloc) {
  const std::size_t n = std::size_t(cfg.hidden) * cfg.experts;
  weight_ = alloc_.allocate(n * 4, MemTag::model_states);
  grad_ = alloc_.allocate(n * 4, MemTag::model_states);
}

void Gate::init(std::uint64_t seed, const Stream& s) {
  const std::size_t n = std::size_t(cfg_.hidden) * cfg_.experts;
  const auto w = normal_vector(n, seed, /*id=*/1, 0.02f);
  dev_.copy_to_device(weight_.data(), w.data(), n * 4, s);
  dev_.fill_zero(grad_.data(), n * 4, s);
}

Exec Gate::fp32_exec(const Stream& s) const {
  Exec ex = dev_.exec(s);
  ex.tensor_cores = false;
  return ex;
}

Routing Gate::forward(const void* x, int tokens, int groups, const Stream& s, bool read) {
  const Exec ex = fp32_exec(s);
  Routing r;
  GateShape g{tokens, cfg_.experts, cfg_.prototypes, cfg_.top_k};
  r.shape.gate = g;
  r.shape.groups = groups;
  r.shape.capacity = cfg_.capacity_factor
                         ? expert_capacity(g.slots(), tokens / groups, cfg_.experts, *cfg_.capacity_factor)
                         : -1;
  const std::size_t te = std::size_t(tokens) * cfg_.experts, ts = std::size_t(tokens) * g.slots(),
                    ge = std::size_t(groups) * cfg_.experts, th = std::size_t(tokens) * cfg_.hidden;
  r.logits = alloc_.allocate(te * 4, MemTag::temporary, s);
  r.probs = alloc_.allocate(te * 4, MemTag::activations, s);
  r.expert = alloc_.allocate(ts * 4, MemTag::activations, s);
  r.position = alloc_.allocate(ts * 4, MemTag::activations, s);
  r.weight = alloc_.allocate(ts * 4, MemTag::activations, s);
  const std::size_t host_words = (cfg_.aux_loss ? 4 : 2) * ge;
  r.host_read_dev = alloc_.allocate(host_words * 4, MemTag::buffers, s);

  Buffer slices;
  if (cfg_.dtype == DType::bf16) {
    slices = logit_slices_bf16(x, tokens, s);
    if (cfg_.gate == GateImpl::paper) sum_split3(ex, slices.as<float>(), tokens, cfg_.experts, r.logits.as<float>());
  } else {
    const float* x32 = static_cast<const float*>(x);
    if (cfg_.dtype != DType::f32) {
      r.x32 = alloc_.allocate(th * 4, MemTag::activations, s);
      convert(ex, x, cfg_.dtype, r.x32.data(), DType::f32, th);
      x32 = r.x32.as<float>();
    }
    gemm(ex, dense_gemm(false, false, tokens, cfg_.experts, cfg_.hidden, x32, weight_.data(), r.logits.data()));
  }
  if (cfg_.gate == GateImpl::paper)
    route_looped(r, s);
  else
    route_fused(r, slices ? slices.as<float>() : nullptr, s);  // with the aux statistics, in one op
  slices.release();
  // The paper gate's counts' copy is queued before its aux statistics: the host waits for the
  // counts alone, and the device computes the statistics while the host plans the dispatch.
  const std::int32_t* counts = read ? copy_to_host(r, 0, 2 * ge, s) : nullptr;
  float* density = r.density_dev();  // the aux statistics after the counts
  if (cfg_.aux_loss && cfg_.gate == GateImpl::paper)
    aux_loss_stats(ex, g, groups, r.probs.as<float>(), r.expert.as<std::int32_t>(), density, density + ge);
  if (read) {
    copied_->synchronize();
    take_counts(r, counts);
  }
  return r;
}

double Routing::aux_loss() const {
  if (!aux_loss_on_host)
    throw Error("Routing::aux_loss: the aux statistics are still on the device; Gate::read_counts "
                "(MoELayer::read_counts) reads them");
  return *aux_loss_on_host;
}

// bf16 tokens against the fp32 weight's three bf16 parts, side by side: one tensor-core GEMM
// with fp32 sums, whose three slices sum to the logits (kernels/bf16_split.h). Nothing is widened.
Buffer Gate::logit_slices_bf16(const void* x, int tokens, const Stream& s) {
  const int H = cfg_.hidden, E = cfg_.experts;
  const Exec ex = dev_.exec(s);
  Buffer parts = alloc_.allocate(std::size_t(H) * 3 * E * 2, MemTag::temporary, s);
  split_bf16(ex, weight_.as<float>(), H, E, Bf16Parts{3, {0, 1, 2}}, parts.data());
  Buffer slices = alloc_.allocate(std::size_t(tokens) * 3 * E * 4, MemTag::temporary, s);
  GemmArgs g = dense_gemm(false, false, tokens, 3 * E, H, x, parts.data(), slices.data(), DType::bf16);
  g.c_dtype = DType::f32;
  gemm(ex, g);
  return slices;
}

// The backward of logits_from_bf16, from dlogits in bf16 parts [hi | lo | lo2 | hi] (written so
// by gate_logit_grads). The weight's gradient x^T dlogits from the first three, summed; dx +=
// dlogits w^T from all four against the weight's parts [hi | hi | hi | lo] -- dlogits w_hi +
// dlogits_hi w_lo, whose error, the terms left out, is 2^-16 of the product: far below bf16's
// rounding of dx, which is the GEMM's one rounding (it adds into dx itself).
void Gate::backward_bf16(const void* x, int tokens, const void* dparts, void* dx, float* grad_out, const Stream& s) {
  const int H = cfg_.hidden, E = cfg_.experts;
  const Exec ex = dev_.exec(s);
  Buffer slices = alloc_.allocate(std::size_t(H) * 3 * E * 4, MemTag::temporary, s);
  GemmArgs dw = dense_gemm(true, false, H, 3 * E, tokens, x, dparts, slices.data(), DType::bf16);
  dw.ldb = 4 * E;  // the first three slices of each row
  dw.c_dtype = DType::f32;
  gemm(ex, dw);
  sum_split3(ex, slices.as<float>(), H, E, grad_out);
  Buffer wparts = alloc_.allocate(std::size_t(H) * 4 * E * 2, MemTag::temporary, s);
  split_bf16(ex, weight_.as<float>(), H, E, Bf16Parts{4, {0, 0, 0, 1}}, wparts.data());
  gemm(ex, dense_gemm(false, true, tokens, H, 4 * E, dparts, wparts.data(), dx, DType::bf16, 1.f, 1.f));
}

const std::int32_t* Gate::copy_to_host(const Routing& r, std::size_t first, std::size_t words, const Stream& s) {
  // Into pinned memory, so that the copy is asynchronous; the host waits for its event alone.
  if (host_read_pinned_.bytes() < words * 4) host_read_pinned_ = alloc_.allocate_pinned(words * 4, MemTag::buffers, s);
  dev_.copy_to_pinned_host(host_read_pinned_.data(), r.routed_dev() + first, words * 4, s);
  if (!copied_) copied_.emplace(dev_.backend());
  copied_->record(s);
  return host_read_pinned_.as<std::int32_t>();
}

void Gate::take_counts(Routing& r, const std::int32_t* host) const {
  const std::size_t ge = r.group_experts();
  r.routed.assign(host, host + ge);
  r.kept.assign(host + ge, host + 2 * ge);
  r.counts_on_host = true;
  if (!cfg_.aux_loss) r.aux_loss_on_host = 0.0;  // nothing more to read
}

void Gate::read_counts(Routing& r, const Stream& s) {
  if (r.counts_on_host && r.aux_loss_on_host) return;
  const std::size_t ge = r.group_experts(), first = r.counts_on_host ? 2 * ge : 0;
  const std::size_t end = (cfg_.aux_loss ? 4 : 2) * ge;
  const std::int32_t* host = copy_to_host(r, first, end - first, s);
  copied_->synchronize();
  if (!r.counts_on_host) take_counts(r, host);
  if (r.aux_loss_on_host) return;
  const float* stats = reinterpret_cast<const float*>(host + (2 * ge - first));  // density, then proxy
  r.density.assign(stats, stats + ge);
  r.proxy.assign(stats + ge, stats + 2 * ge);
  const GateShape& g = r.shape.gate;
  const double scale = double(cfg_.aux_coef) * g.per_prototype() / g.prototypes;
  double aux = 0.0;
  for (std::size_t i = 0; i < ge; ++i) aux += scale * r.density[i] * r.proxy[i];
  r.aux_loss_on_host = aux / r.groups();
}

void Gate::route_fused(Routing& r, const float* slices, const Stream& s) {
  const Exec ex = fp32_exec(s);
  Buffer workspace = alloc_.allocate(route_tokens_workspace_bytes(ex, r.shape, cfg_.aux_loss), MemTag::temporary, s);
  float* density = cfg_.aux_loss ? r.density_dev() : nullptr;
  RouteArgs a{r.shape, slices, r.logits.as<float>(), r.probs.as<float>(), r.expert.as<std::int32_t>(),
              r.weight.as<float>(), r.position.as<std::int32_t>(), r.routed_dev(), r.kept_dev(),
              density, density ? density + r.group_experts() : nullptr, workspace.data(), workspace.bytes()};
  if (cfg_.gate_kernels)
    route_tokens(ex, a, *cfg_.gate_kernels);
  else
    route_tokens(ex, a);
}

void Gate::route_looped(Routing& r, const Stream& s) {
  const Exec ex = fp32_exec(s);
  const GateShape& g = r.shape.gate;
  const std::size_t te = std::size_t(g.tokens) * g.experts, tec = te * std::size_t(r.shape.capacity);
  prototype_softmax(ex, g, r.logits.as<float>(), r.probs.as<float>());
  Buffer remaining = alloc_.allocate(te * 4, MemTag::temporary, s);
  Buffer one_hot = alloc_.allocate(te * 4, MemTag::temporary, s);
  Buffer position_dense = alloc_.allocate(te * 4, MemTag::temporary, s);
  dev_.copy(remaining.data(), r.probs.data(), te * 4, s);
  dev_.fill_zero(r.routed_dev(), 2 * r.group_experts() * 4, s);  // routed and kept
  r.combine = alloc_.allocate(std::max<std::size_t>(tec, 1) * 4, MemTag::activations, s);
  r.dispatch = alloc_.allocate(std::max<std::size_t>(tec, 1) * 4, MemTag::activations, s);
  dev_.fill_zero(r.combine.data(), tec * 4, s);
  for (int j = 0; j < g.k; ++j) {
    argmax_round(ex, g, j, r.probs.as<float>(), remaining.as<float>(), r.expert.as<std::int32_t>(),
                 r.weight.as<float>(), one_hot.as<float>());
    cumsum_positions_round(ex, r.shape, j, one_hot.as<float>(), r.routed_dev(), r.kept_dev(),
                           position_dense.as<std::int32_t>(),
                           r.expert.as<std::int32_t>(), r.position.as<std::int32_t>());
    combine_round(ex, r.shape, j, r.expert.as<std::int32_t>(), r.position.as<std::int32_t>(), r.weight.as<float>(),
                  r.combine.as<float>(), r.dispatch.as<float>());
  }
}

void Gate::backward(const Routing& r, const void* x, const float* dweight, void* dx, float aux_scale, float* grad_out,
                    const Stream& s) {
  const Exec ex = fp32_exec(s);
  const GateShape& g = r.shape.gate;
  const int T = g.tokens, G = r.groups();
  const std::size_t te = std::size_t(T) * cfg_.experts;
  GateGradArgs a{g, G, r.expert.as<std::int32_t>(), dweight, r.probs.as<float>()};
  if (cfg_.aux_loss) {
    // d(mean_g aux_g)/d probs[t, e] = coef (F/Z) density[g, e] / T_g / G, from the density on the
    // device: the backward reads nothing on the host.
    a.density = r.density_dev();
    a.aux_scale = float(double(cfg_.aux_coef) * g.per_prototype() / g.prototypes / (double(T) / G) / G * aux_scale *
                        loss_scale_);
  }
  if (cfg_.dtype == DType::bf16) {
    Buffer dparts = alloc_.allocate(te * 4 * 2, MemTag::temporary, s);
    gate_logit_grads(ex, a, Bf16Parts{4, {0, 1, 2, 0}}, dparts.data());
    return backward_bf16(x, T, dparts.data(), dx, grad_out, s);
  }
  Buffer dlogits = alloc_.allocate(te * 4, MemTag::temporary, s);
  gate_logit_grads(ex, a, Bf16Parts{}, dlogits.data());
  const std::size_t th = std::size_t(T) * cfg_.hidden;
  const float* x32 = cfg_.dtype == DType::f32 ? static_cast<const float*>(x) : r.x32.as<float>();  // kept from forward
  gemm(ex, dense_gemm(true, false, cfg_.hidden, cfg_.experts, T, x32, dlogits.data(), grad_out));
  if (cfg_.dtype == DType::f32) {
    gemm(ex, dense_gemm(false, true, T, cfg_.hidden, cfg_.experts, dlogits.data(), weight_.data(), dx, DType::f32,
                        1.f, 1.f));
  } else {
    Buffer dx32 = alloc_.allocate(th * 4, MemTag::temporary, s);
    Buffer dx_typed = alloc_.allocate(th * dtype_size(cfg_.dtype), MemTag::temporary, s);
    gemm(ex, dense_gemm(false, true, T, cfg_.hidden, cfg_.experts, dlogits.data(), weight_.data(), dx32.data()));
    convert(ex, dx32.data(), DType::f32, dx_typed.data(), cfg_.dtype, th);
    axpy(ex, th, 1.f, dx_typed.data(), dx, cfg_.dtype);
  }
}

}  // namespace moebench
