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
  const double h = m.hidden, f = m.ffn, S = m.seq, V = m.vocab, T = double(sequences) * S, L = m.layers,
               es = element_bytes, heads = m.heads, E = m.experts;
  int moe_layers = 0;
  for (int l = 0; l < m.layers; ++l) moe_layers += m.is_moe(l) ? 1 : 0;
  const double ML = moe_layers, DL = L - moe_layers, R = T * m.top_k * m.prototypes;  // dropless rows
  std::vector<std::pair<std::string, Work>> phases;
  // Bytes: each phase's own least traffic -- its weights read once, its weight gradients written
  // once, every activation it takes from or leaves to another phase moved once (what a phase
  // computes and consumes inside itself is not counted). 4-byte ids, statistics and gate values.
  // FLOPs: the forward's matmuls; a matmul's backward is its input gradient and its weight
  // gradient, each as much again; causal attention's core (half the S x S square of QK^T and PV)
  // twice its forward in the backward.
  auto add = [&](const char* phase, double flops, double bytes) { phases.push_back({phase, Work{flops, bytes}}); };
  const double logits = 2 * T * h * V, qkv = L * 2 * T * 3 * h * h, out = L * 2 * T * h * h,
               core = L * 2 * double(sequences) * S * S * h, ffn = DL * 2 * T * 2 * h * f;
  add("embed.fwd", 0, T * (4 + 2 * h * es) + S * h * es);         // ids, token and position rows in, x out
  add("embed.bwd", 0, T * (4 + 3 * h * es) + S * h * es);         // dx in; the token rows' gradient read
                                                                   // and written, the positions' written
  add("ln.fwd", 0, 2 * L * T * (2 * h * es + 8));                  // x in, y and mean, rstd out
  add("ln.bwd", 0, 2 * L * T * (4 * h * es + 8));                  // x, dy, the residual's gradient, statistics in; dx out
  add("attention.qkv.fwd", qkv, L * (T * 4 * h * es + 3 * h * h * es));        // x in, q, k, v out
  add("attention.core.fwd", core, L * T * (4 * h * es + 4 * heads));           // q, k, v in; o and its logsumexp out
  add("attention.out.fwd", out, L * (T * 3 * h * es + h * h * es));            // o and the residual in, the sum out
  add("attention.out.bwd", out, L * (T * 2 * h * es + h * h * es));            // dy in, do out
  add("attention.core.bwd", 2 * core, L * T * (8 * h * es + 4 * heads));       // q, k, v, o, do in; dq, dk, dv out
  add("attention.qkv.bwd", qkv, L * (T * 4 * h * es + 3 * h * h * es));        // dq, dk, dv in, dx out
  add("attention.wgrad", qkv + out, L * (T * 6 * h * es + 4 * h * h * es));    // x, dqkv, o, dy in; dW out
  if (DL > 0) {
    add("ffn.fwd", ffn, DL * (T * (3 * h + 2 * f) * es + 2 * h * f * es));     // x, residual in; z, GeLU(z), y out
    add("ffn.bwd", ffn, DL * (T * (2 * h + 2 * f) * es + 2 * h * f * es));     // dy, z in; dz, dx out
    add("ffn.wgrad", ffn, DL * (T * (2 * h + 2 * f) * es + 2 * h * f * es));   // GeLU(z), dy, x, dz in; dW out
  }
  if (ML > 0) {  // the gate in fp32; an MoE layer's weight gradients are inside its backward
    const double gate = ML * 2 * T * h * E, experts = ML * 2 * R * 2 * h * f, weights = ML * E * 2 * h * f * es,
                 gate_weights = ML * h * E * 4;
    add("moe.gating", gate, ML * T * (h * es + 4 * E) + ML * R * 8 + gate_weights);  // x in; probabilities, picks out
    add("moe.dispatch", 0, ML * (T * h * es + R * (h * es + 4)));                       // x in, its rows out
    add("moe.expert", experts, ML * R * (2 * h + f) * es + weights);                    // rows in; hidden, out
    add("moe.combine", 0, ML * (R * (h * es + 8) + T * h * es));                        // rows, weights in; y out
    add("moe.combine.bwd", 0, ML * (T * h * es + R * (2 * h * es + 12)));               // dy, rows in; drows, dweights out
    add("moe.expert.bwd", 2 * experts, ML * R * (3 * h + f) * es + 2 * weights);        // dy, x rows, hidden in; dx rows, dW out
    add("moe.dispatch.bwd", 0, ML * (R * (h * es + 4) + T * h * es));                   // drows in, dx out
    add("moe.gating.bwd", 2 * gate, ML * T * (3 * h * es + 4 * E) + ML * R * 4 + 2 * gate_weights);  // x, p, dweights in; dx, dWg out
  }
  add("head.fwd", logits, T * (2 * h * es + 16) + V * h * es + T * V * es);  // x, targets in; LN out, its statistics,
                                                                             // the loss, the logits' gradient out
  add("head.bwd", logits, T * V * es + V * h * es + T * (2 * h * es + 8));   // dlogits, x, statistics in; dx out
  add("head.wgrad", logits, T * V * es + T * h * es + 2 * V * h * es);       // dlogits, LN in; the tied gradient read, written
  // AdamW: the gradient read, m and v read and written in fp32, and the weight read and written
  // -- in fp32 it is its own master; a 16-bit weight has an fp32 master beside it.
  const double per_weight = element_bytes == 4 ? 4 + 2 * 2 * 4 + 2 * 4 : es + 2 * 3 * 4 + es;
  add("step.optimizer", 0, trained_weights(m) * per_weight);
  return phases;
}

Work gpt_step_work(const ModelShape& m, int sequences, int element_bytes) {
  const double h = m.hidden, f = m.ffn, V = m.vocab, tokens = double(sequences) * m.seq, es = element_bytes;
  Work w;
  for (const auto& [phase, work] : gpt_step_phases(m, sequences, element_bytes)) {
    w.flops += work.flops;
    if (phase == "step.optimizer") w.bytes += work.bytes;
  }
  const double activations = 2 * tokens * m.layers * (7 * h + 2 * f) * es + 2 * tokens * V * es;
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
                                      const std::string& device, const std::string& dtype, int ranks, int cores) {
  RooflineProfile p;
  if (path.empty()) {
    p.note = "none: no profile of this device given (experiments/models/profile.sh measures one)";
    return p;
  }
  HardwareProfile hw;
  std::string measured_backend, measured_device, measured_dtype;
  try {
    hw = load_hardware_profile(path);
    const CsvRows t = CsvRows::read(path);
    if (t.size() > 0 && t.has("backend")) measured_backend = t.cell(0, "backend");
    if (t.size() > 0 && t.has("device")) measured_device = t.cell(0, "device");
    if (t.size() > 0 && t.has("dtype")) measured_dtype = t.cell(0, "dtype");
  } catch (const Error& e) {
    throw Error(option + ": " + e.what());
  }
  if (measured_backend != backend || measured_device != device) {
    p.note = "none: " + std::filesystem::path(path).filename().string() + " was measured on " + (measured_backend.empty() ? "no named device (a shipped profile)"
                                                                              : measured_backend + " " + measured_device) +
             ", this run is " + backend + " " + device + " (experiments/models/profile.sh measures this one)";
    return p;
  }
  // A GPU's sweep measures one precision's GEMM peak and copies it into the other's row; 16-bit
  // tensor cores run at about twice TF32's rate, so a floor from the other precision's sweep would
  // misplace every compute-bound row. The CPU computes fp32 whatever the dtype: one peak.
  const auto sixteen_bit = [](const std::string& t) { return t == "fp16" || t == "bf16"; };
  if (backend == "cuda" && sixteen_bit(measured_dtype) != sixteen_bit(dtype)) {
    p.note = "none: " + std::filesystem::path(path).filename().string() + " measured " +
             (measured_dtype.empty() ? std::string("no named dtype") : measured_dtype) + " GEMMs, this run is " + dtype +
             " (experiments/models/profile.sh --dtype " + dtype + " measures its peak)";
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
