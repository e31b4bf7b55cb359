#include "bench/mpmoe/cases.h"
#include "models/paper_specs.h"
#include "runtime/device.h"

namespace moebench::mpmoe {

LayerShape layer_shape(const std::string& model, int experts, int top_k, DType dtype) {
  LayerShape s;
  s.model = model;
  MoEConfig& c = s.moe;
  if (model == "tiny") {
    c.hidden = 32;
    c.ffn = 64;
  } else {
    const MoELayerSpec& spec = moe_layer_spec(model);
    c.hidden = spec.hidden;
    c.ffn = spec.ffn;
  }
  c.experts = experts;
  c.top_k = top_k;
  c.dtype = dtype;
  c.aux_loss = true;
  return s;
}

void PairedRounds::add(CaseResult& c, const PipelineConfig& p, bool sequential) {
  const std::string key = config_key(p, sequential);
  for (const PairedConfig& q : configs_)
    if (config_key(q.pipe, q.sequential) == key) return;
  c.configs[key] = p;
  configs_.push_back({p, sequential});
}

void PairedRounds::run(CaseResult& c, LayerRunner& r, int warmup, int rounds) {
  if (configs_.empty()) return;
  for (PairedConfig& p : configs_) p.warm = c.runs.count(config_key(p.pipe, p.sequential)) > 0;
  const std::vector<RunResult> results = r.run_paired(configs_, warmup, rounds);
  for (std::size_t i = 0; i < configs_.size(); ++i) c.runs[config_key(configs_[i].pipe, configs_[i].sequential)] = results[i];
}

std::optional<std::string> check_memory(const BenchContext& ctx, const MemoryPlan& plan) {
  const int W = ctx.world.size();
  double biggest = 0, pinned = 0;
  for (const auto& s : plan.shapes) {
    const MoEConfig& c = s.moe;
    const double es = double(dtype_size(c.dtype));
    for (int B : plan.tokens) {
      const double rows = 2.0 * c.slots() * B;  // twice a balanced share, for skew
      const double weights = 4.0 * (c.experts / W) * double(c.hidden) * c.ffn * es;
      biggest = std::max(biggest, weights + rows * (6.0 * c.hidden + 2.0 * c.ffn) * es + 4.0 * B * c.hidden * es);
      if (plan.offloads) pinned = std::max(pinned, rows * (c.hidden + c.ffn) * es);
    }
  }
  for (const auto& s : plan.memory_shapes) {
    const MoEConfig& c = s.moe;
    const double es = double(dtype_size(c.dtype));
    for (int B : plan.memory_tokens)
      biggest = std::max(biggest, 8.0 * (c.experts / W) * double(c.hidden) * c.ffn * 4 +
                                      2.0 * c.slots() * B * (6.0 * c.hidden + 2.0 * c.ffn) * es + 4.0 * B * c.hidden * es);
  }
  if (pinned > 0) {
    std::size_t free_b = 0, total_b = 0;
    detail::host_memory(&free_b, &total_b);
    const double share = double(free_b) / ctx.rt.local_size();
    if (pinned > 0.5 * share) {
      const bool layer = plan.layer_strategy.has_value();
      const std::string what = layer ? std::string("--strategy: ") + reuse_name(*plan.layer_strategy) + " offloads "
                                     : std::string("--tokens: the figures' S1-S3 offload ");
      return what + format_bytes(pinned) + " per rank to pinned host memory, and only " + format_bytes(share) +
             " is free per rank (half of it may be pinned); use fewer --tokens" + (layer ? " or S4 (no offload)" : "");
    }
  }
  return ctx.check_fits(std::uint64_t(biggest), "--tokens/--memory-tokens/--models");
}

void explain(CaseResult& c, LayerRunner& r) {
  const MoEConfig& cfg = r.layer().config();
  const RunResult& m = *c.memory;
  const double es = double(dtype_size(cfg.dtype)), B = r.tokens(), M = cfg.hidden, H = cfg.ffn, S = cfg.slots();
  const double E = cfg.experts, R = std::max(m.local_rows, 1.0), sent = std::max(m.local_sent_rows, 1.0);
  auto& x = c.explained;
  x["T_I"] = B * M * es;
  x["T_DI"] = R * M * es;
  x["T_M"] = R * H * es;
  x["T_DO"] = R * M * es;
  x["T_O"] = B * M * es;
  x["returned_rows"] = sent * M * es;  // the combine's received rows, kept for the gate's gradient
  x["routing"] = B * E * 4 + 3 * B * S * 4       // probabilities; expert, position, weight
                 + 3 * B * S * 4                 // their part slices
                 + B * S * 4                     // the row map
                 + (cfg.dtype == DType::f32 ? 0 : B * M * 4);  // the gate's fp32 input
  double sum = 0;
  for (const auto& [k, v] : x) sum += v;
  x["unexplained"] = m.local_peak[int(MemTag::activations)] - sum;
  c.rank0_activations = m.local_peak[int(MemTag::activations)];
  // Temporaries at their peak, inside the experts' backward: what Eq. 3 counts (the gradients
  // of T_DO, T_DI and T_M) and what it leaves out (the layer's input and output gradients, the
  // gate's, GeLU's output recomputed, the logits the routing keeps).
  auto& t = c.explained_temporary;
  t["dT_O_and_dT_I"] = 2 * B * M * es;
  t["dT_DO"] = R * M * es;
  t["dT_DI"] = R * M * es;
  t["dT_M"] = R * H * es;
  t["gelu_recomputed"] = R * H * es;
  t["gate_and_logits"] = B * S * 4 + B * E * 4;  // combine-weight gradients; the router's logits
  sum = 0;
  for (const auto& [k, v] : t) sum += v;
  t["unexplained"] = m.local_peak[int(MemTag::temporary)] - sum;
  // Communication buffers at their peak, the combine's backward exchange: its send and receive
  // rows, the row permutation, the counts and bases, and what the gate reads back to the host in
  // its one copy (routed and kept counts, with the aux loss its density and proxy).
  auto& b = c.explained_buffers;
  b["send_and_receive"] = (sent + R) * M * es;
  b["maps_and_counts"] = R * 8 + (c.cfg.aux_loss ? 5 : 3) * E * 4;
  sum = 0;
  for (const auto& [k, v] : b) sum += v;
  b["unexplained"] = m.local_peak[int(MemTag::buffers)] - sum;
}

}  // namespace moebench::mpmoe
