#include "models/roofline.h"
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include "kernels/exec.h"
#include "models/csv_rows.h"

namespace moebench {

Work moe_expert_work(int hidden, int ffn, int local_experts, double rows, int element_bytes) {
  const double h = hidden, f = ffn, es = element_bytes, weights = 2.0 * local_experts * h * f * es;
  return Work{12 * rows * h * f, 3 * weights + 2 * rows * f * es};
}

Work moe_layer_work(double tokens, int hidden, int ffn, int experts, int local_experts, double rows, int element_bytes) {
  const double h = hidden, es = element_bytes, gate_weights = h * experts * 4.0;  // fp32 gate
  Work w = moe_expert_work(hidden, ffn, local_experts, rows, element_bytes);
  w.flops += 6 * tokens * h * experts;
  w.bytes += 3 * gate_weights + 4 * tokens * h * es;
  return w;
}

namespace {
// The trained weights' elements (embeddings, projections, FFNs or experts and gates; not the
// LayerNorms').
double trained_weights(const ModelShape& m) {
  const double h = m.hidden, f = m.ffn;
  double weights = double(m.vocab) * h + m.seq * h;  // tied embedding, positions
  for (int l = 0; l < m.layers; ++l) {
    weights += 4 * h * h;  // q, k, v, projection
    weights += m.is_moe(l) ? m.experts * 2 * h * f + h * m.experts : 2 * h * f;
  }
  return weights;
}
}  // namespace

std::vector<std::pair<std::string, Work>> gpt_step_phases(const ModelShape& m, int sequences, int element_bytes) {
  const double h = m.hidden, f = m.ffn, S = m.seq, V = m.vocab, tokens = double(sequences) * S, L = m.layers;
  const int routed = m.top_k * m.prototypes;
  int moe_layers = 0;
  for (int l = 0; l < m.layers; ++l) moe_layers += m.is_moe(l) ? 1 : 0;
  const double dense_layers = L - moe_layers;
  // Forward FLOPs; a matmul's backward is its input gradient and its weight gradient, each as
  // much again; causal attention's core (half the S x S square of QK^T and PV) twice its forward.
  const double logits = 2 * tokens * h * V, qkv = L * 2 * tokens * 3 * h * h, out = L * 2 * tokens * h * h,
               core = L * 2 * double(sequences) * S * S * h, ffn = dense_layers * 2 * tokens * 2 * h * f,
               gate = moe_layers * 2 * tokens * h * m.experts, experts = moe_layers * 2 * tokens * routed * 2 * h * f;
  std::vector<std::pair<std::string, double>> out_flops = {
      {"attention.qkv.fwd", qkv}, {"attention.core.fwd", core}, {"attention.out.fwd", out}, {"head.fwd", logits},
      {"head.bwd", logits},       {"attention.out.bwd", out},   {"attention.core.bwd", 2 * core},
      {"attention.qkv.bwd", qkv}, {"head.wgrad", logits},       {"attention.wgrad", qkv + out}};
  if (dense_layers > 0)
    for (const char* phase : {"ffn.fwd", "ffn.bwd", "ffn.wgrad"}) out_flops.push_back({phase, ffn});
  if (moe_layers > 0) {  // the MoE layer's weight gradients are inside its backward
    out_flops.push_back({"moe.gating", gate});
    out_flops.push_back({"moe.expert", experts});
    out_flops.push_back({"moe.expert.bwd", 2 * experts});
    out_flops.push_back({"moe.gating.bwd", 2 * gate});
  }
  std::vector<std::pair<std::string, Work>> phases;
  for (const auto& [phase, flops] : out_flops) phases.push_back({phase, Work{flops, 0}});
  // AdamW: the gradient read, m and v read and written in fp32, and the weight read and written
  // -- in fp32 it is its own master; a 16-bit weight has an fp32 master beside it.
  const double es = element_bytes, per_weight = element_bytes == 4 ? 4 + 2 * 2 * 4 + 2 * 4 : es + 2 * 3 * 4 + es;
  phases.push_back({"step.optimizer", Work{0, trained_weights(m) * per_weight}});
  return phases;
}

Work gpt_step_work(const ModelShape& m, int sequences, int element_bytes) {
  const double h = m.hidden, f = m.ffn, V = m.vocab, tokens = double(sequences) * m.seq, es = element_bytes;
  Work w;
  for (const auto& [phase, work] : gpt_step_phases(m, sequences, element_bytes)) {
    w.flops += work.flops;
    w.bytes += work.bytes;  // the optimizer's
  }
  const double activations = 2 * tokens * m.layers * (7 * h + 2 * f) * es + 2 * tokens * V * 4;
  w.bytes += 3 * trained_weights(m) * es + activations;  // weights read twice, gradients written
  return w;
}

double rank_rate_scale(const HardwareProfile& hw, bool gpu, int ranks, int cores) {
  if (gpu || cores <= 0) return 1;
  const double p = std::max(1, hw.gpus_per_node), c = cores, r = std::max(1, ranks);
  return std::max(1.0, p / c) * std::min(1.0, c / r);
}

Roofline roofline(const Work& w, const HardwareProfile& hw, bool half, double rate_scale, double measured_ms) {
  Roofline r;
  r.flops = w.flops;
  r.bytes = w.bytes;
  double best = 0;
  for (const auto& [flops, eff] : hw.gemm_efficiency) best = std::max(best, eff);
  r.gemm_flops_per_s = hw.peak_flops(half) * best * rate_scale;
  r.bytes_per_s = hw.memory_bw * rate_scale;
  const double compute = w.flops / r.gemm_flops_per_s, memory = w.bytes / r.bytes_per_s;
  r.floor_ms = 1e3 * std::max(compute, memory);
  r.bound = compute >= memory ? "compute" : "memory";
  r.achieved_tflops = measured_ms > 0 ? w.flops / (measured_ms * 1e-3) / 1e12 : 0;
  r.time_over_floor = r.floor_ms > 0 ? measured_ms / r.floor_ms : 0;
  return r;
}

RooflineProfile load_roofline_profile(const std::string& option, const std::string& path, const std::string& backend,
                                      const std::string& device, int ranks, int cores) {
  RooflineProfile p;
  if (path.empty()) {
    p.note = "none: no profile of this device given (experiments/models/profile.sh measures one)";
    return p;
  }
  HardwareProfile hw;
  std::string measured_backend, measured_device;
  try {
    hw = load_hardware_profile(path);
    const CsvRows t = CsvRows::read(path);
    if (t.size() > 0 && t.has("backend")) measured_backend = t.cell(0, "backend");
    if (t.size() > 0 && t.has("device")) measured_device = t.cell(0, "device");
  } catch (const Error& e) {
    throw Error(option + ": " + e.what());
  }
  if (measured_backend != backend || measured_device != device) {
    p.note = "none: " + std::filesystem::path(path).filename().string() + " was measured on " + (measured_backend.empty() ? "no named device (a shipped profile)"
                                                                              : measured_backend + " " + measured_device) +
             ", this run is " + backend + " " + device + " (experiments/models/profile.sh measures this one)";
    return p;
  }
  p.rate_scale = rank_rate_scale(hw, backend == "cuda", ranks, cores);
  char scale[64];
  std::snprintf(scale, sizeof scale, "%.3g", p.rate_scale);
  const std::filesystem::path f(path);
  const std::string shown = (f.parent_path().filename() / f.filename()).string();  // not the checkout's own path
  p.note = shown + " (" + hw.name + (p.rate_scale != 1 ? "; its per-rank rates x " + std::string(scale) + " for this run's ranks" : "") + ")";
  p.hw = std::move(hw);
  return p;
}

const std::vector<std::string>& roofline_columns() {
  static const std::vector<std::string> c = {"flops", "min_bytes", "floor_ms", "floor_bound", "achieved_tflops",
                                             "time_over_floor", "roofline_profile"};
  return c;
}

std::vector<std::string> roofline_cells(const RooflineProfile& p, const Work& w, bool half, double measured_ms) {
  auto g = [](double v, int digits) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*g", digits, v);
    return std::string(b);
  };
  const double achieved = measured_ms > 0 ? w.flops / (measured_ms * 1e-3) / 1e12 : 0;
  if (!p.hw) return {g(w.flops, 6), g(w.bytes, 6), "n/a", "n/a", g(achieved, 4), "n/a", p.note};
  const Roofline r = roofline(w, *p.hw, half, p.rate_scale, measured_ms);
  return {g(r.flops, 6), g(r.bytes, 6), g(r.floor_ms, 5), r.bound, g(r.achieved_tflops, 4), g(r.time_over_floor, 4), p.note};
}

}  // namespace moebench
