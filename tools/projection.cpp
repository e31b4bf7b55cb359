#include "tools/projection.h"
#include <libfccp/csv.h>
#include <filesystem>
#include "models/collective_model.h"
#include "tools/mpmoe_projection.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include "harness/provenance.h"
#include "models/paper_specs.h"
#include "models/paper_values.h"

namespace moebench {
namespace {

std::string pct(double v) { return fmt(100 * v, 4); }

}  // namespace

double T2Row::paper_throughput() const { return paper_number(paper_id + ".throughput"); }

const std::vector<T2Row>& ppmoe_t2_rows() {
  using K = LayoutKind;
  static const std::vector<T2Row> rows = {
      {"0.3B Dense", K::dense, 1, 8, 4, 1, false, 32, "000.t2.r1", "small"},
      {"0.3B Dense", K::dense, 4, 8, 1, 1, true, 32, "000.t2.r2", "small"},
      {"0.3B Dense", K::dense, 32, 1, 1, 1, true, 32, "000.t2.r3", "small"},
      {"6.7B DPMoE", K::dpmoe, 32, 1, 1, 64, true, 32, "000.t2.r4", "small"},
      {"6.7B DPMoE", K::dpmoe, 4, 8, 1, 64, true, 32, "000.t2.r5", "small"},
      {"6.7B PPMoE", K::ppmoe, 1, 8, 4, 64, false, 32, "000.t2.r6", "small"},
      {"6.7B Dense", K::dense, 1, 8, 16, 1, false, 128, "000.t2.r7", "large"},
      {"6.7B Dense", K::dense, 16, 8, 1, 1, true, 128, "000.t2.r8", "large"},
      {"6.7B Dense", K::dense, 128, 1, 1, 1, true, 128, "000.t2.r9", "large"},
      {"143B DPMoE", K::dpmoe, 256, 1, 1, 64, true, 256, "000.t2.r10", "large"},
      {"143B DPMoE", K::dpmoe, 128, 2, 1, 64, true, 256, "000.t2.r11", "large"},
      {"143B DPMoE", K::dpmoe, 32, 8, 1, 64, true, 256, "000.t2.r12", "large"},
      {"143B PPMoE", K::ppmoe, 1, 8, 16, 64, false, 128, "000.t2.r13", "large"},
  };
  return rows;
}

// GPT-3's batch sizes (Brown et al. 2020, Table 2.1: 0.5M tokens for Medium, 2M for 6.7B): 000
// gives none.
static int global_sequences(const T2Row& r) { return r.setting == "small" ? 256 : 1024; }

ModelShape t2_model(const T2Row& r) {
  const ModelSpec& spec = model_spec(r.setting == "small" ? "gpt3-medium" : "gpt3-6.7b");
  return r.kind == LayoutKind::dense ? spec.shape.dense() : spec.shape;
}

StepLayout t2_layout(const T2Row& r, const HardwareProfile& hw) {
  StepLayout l;
  l.kind = r.kind;
  l.dp = r.dp;
  l.tp = r.tp;
  l.pp = r.pp;
  l.zero = r.zero;
  l.zero_stage = 2;
  l.schedule = PipelineScheduleKind::one_f_one_b;
  l.half = true;
  // 000 Sec. 4.2: the micro-batch size "set adaptively so that the GPU memory utilization is
  // above 80%": the largest power of two that fits.
  const int per_rank = std::max(1, global_sequences(r) / r.dp);
  const ModelShape m = t2_model(r);
  // Activation recomputation only where not even one sequence per micro-batch fits without it.
  l.micro_batch_sequences = 1;
  for (bool recompute : {false, true}) {
    bool found = false;
    for (int b = 1; b <= per_rank && per_rank % b == 0; b *= 2) {
      StepLayout c = l;
      c.recompute = recompute;
      c.micro_batch_sequences = b;
      c.micro_batches = per_rank / b;
      if (validate_step(m, c, hw) || !predict_step(m, c, hw).fits) break;
      l = c;
      found = true;
    }
    if (found) break;
  }
  l.micro_batches = per_rank / l.micro_batch_sequences;
  return l;
}

std::string t2_assumptions(const T2Row& r, const StepLayout& l) {
  return "global batch " + std::to_string(global_sequences(r)) +
         " sequences of 2048 (GPT-3's for this size; 000 gives none); micro-batch " +
         std::to_string(l.micro_batch_sequences) + " sequences (the largest that fits, as 000 Sec. 4.2), " +
         std::to_string(l.micro_batches) + " per step" +
         (l.recompute ? ", activations recomputed (none fit without)" : "") + "; 1F1B; ZeRO stage 2 where ZeRO (000 names no stage; stage 1 " +
         "cannot hold rows 000 ran); fp16";
}

Provenance model_provenance(const HardwareProfile& hw, int gpus, const std::string& scale, const std::string& dtype) {
  Provenance p;
  p.backend = "model";
  p.device = hw.name;
  p.driver = p.cuda = p.nccl = "-";
  p.ranks = std::to_string(gpus);
  p.nodes = p.hosts = p.processors = "-";  // no run: the profile says what the modelled cluster is
  p.link = "modelled: profile " + hw.path.substr(hw.path.find_last_of('/') + 1);
  p.dtype = dtype;
  p.scale = scale;
  p.commit = source_commit();
  p.date = utc_now_iso8601();
  return p;
}

// Which term a missed Table 2 row points at, by how much, and the measured share to hold it
// against (000 Tables 1 and 3).
static std::string t2_miss(const T2Row& r, const StepPrediction& p, double err) {
  const ForwardParts& f = p.forward;
  std::string s = "speed ratio " + fmt(100 * (err - 1), 3) + "% off";
  if (!p.fits) return s + "; memory: modelled " + fmt((p.model_state_bytes + p.activation_bytes) / 1e9, 3) +
                      " GB does not fit, the paper ran it";
  if (r.kind == LayoutKind::dpmoe)
    return s + "; the all-to-all term: modelled " + pct((f.moe_dispatch + f.moe_combine) / f.total()) +
           "% of the forward, 000 Table 1 measured " + fmt(paper_number("000.t1.a2a_of_total.pct"), 3) + "%";
  if (r.tp > 1)
    return s + "; the TP all-reduce term: modelled " + pct((f.attention_allreduce + f.ffn_allreduce + f.moe_combine) / f.total()) +
           "% of the forward, 000 Table 3 measured " +
           fmt(paper_number("000.t3.moe_allreduce.pct") + paper_number("000.t3.ffn_allreduce.pct"), 3) +
           "% (MoE and FFN all-reduces)";
  return s + "; the DP gradient sync: modelled " + pct(p.dp_sync / p.step) + "% of the step (no measured share to hold it against)";
}

ProjectedTable project_ppmoe_t2(const HardwareProfile& hw) {
  ProjectedTable out{CsvTable({"setting", "model", "dp", "tp", "pp", "ep", "zero", "gpus", "modelled_tokens_per_s_per_gpu",
                               "paper_tokens_per_s_per_gpu", "throughput_model_over_paper", "modelled_speed_ratio",
                               "paper_speed_ratio", "speed_ratio_model_over_paper", "within_15pct", "fits_memory",
                               "modelled_memory_GB", "step_s", "pipeline_s", "bubble", "dp_sync_s", "optimizer_s",
                               "largest_forward_term", "miss", "assumptions", "calibration"}),
                     {}};
  // Speed ratio: throughput over the paper's slowest Dense row of the same setting (its baseline).
  std::map<std::string, double> base_model, base_paper;
  std::vector<StepPrediction> pred;
  for (const T2Row& r : ppmoe_t2_rows()) pred.push_back(predict_step(t2_model(r), t2_layout(r, hw), hw));
  for (std::size_t i = 0; i < pred.size(); ++i) {
    const T2Row& r = ppmoe_t2_rows()[i];
    if (r.kind != LayoutKind::dense) continue;
    if (!base_paper.count(r.setting) || r.paper_throughput() < base_paper[r.setting]) {
      base_paper[r.setting] = r.paper_throughput();
      base_model[r.setting] = pred[i].tokens_per_s_per_gpu;
    }
  }
  int within = 0, rows = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) {
    const T2Row& r = ppmoe_t2_rows()[i];
    const StepPrediction& p = pred[i];
    const double ratio_m = p.tokens_per_s_per_gpu / base_model[r.setting];
    const double ratio_p = r.paper_throughput() / base_paper[r.setting];
    const double err = ratio_m / ratio_p;
    const bool ok = std::fabs(err - 1) <= 0.15 && p.fits;
    within += ok;
    ++rows;
    const ForwardParts& f = p.forward;
    const std::vector<std::pair<const char*, double>> terms = {
        {"attention", f.attention}, {"attention all-reduce", f.attention_allreduce}, {"FFN", f.ffn},
        {"FFN all-reduce", f.ffn_allreduce}, {"MoE gating", f.moe_gating}, {"MoE dispatch", f.moe_dispatch},
        {"MoE experts", f.moe_expert}, {"MoE combine", f.moe_combine}, {"other", f.other}};
    const auto largest = *std::max_element(terms.begin(), terms.end(), [](auto& a, auto& b) { return a.second < b.second; });
    const double mem_gb = (p.model_state_bytes + p.activation_bytes) / 1e9;
    out.table.add_row({r.setting, r.model, std::to_string(r.dp), std::to_string(r.tp), std::to_string(r.pp),
                       std::to_string(r.ep), r.zero ? "yes" : "no", std::to_string(r.gpus),
                       p.fits ? fmt(p.tokens_per_s_per_gpu, 4) : "OOM", fmt(r.paper_throughput()),
                       p.fits ? fmt(p.tokens_per_s_per_gpu / r.paper_throughput(), 3) : "n/a", fmt(ratio_m, 3),
                       fmt(ratio_p, 3), fmt(err, 3), ok ? "yes" : "no", p.fits ? "yes" : "no", fmt(mem_gb, 4),
                       fmt(p.step, 4), fmt(p.pipeline, 4), fmt(p.bubble, 3), fmt(p.dp_sync, 4), fmt(p.optimizer, 4),
                       std::string(largest.first) + " (" + pct(largest.second / f.total()) + "% of the forward)",
                       ok ? "-" : t2_miss(r, p, err), t2_assumptions(r, t2_layout(r, hw)), kCalibration});
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "ppmoe.t2 (modelled on %s): %d of %d rows' speed ratios within 15%% of the paper's (target: 10 of 13)",
                hw.name.c_str(), within, rows);
  out.summary.push_back(line);
  return out;
}

std::vector<Ordering> ppmoe_t2_orderings(const HardwareProfile& hw) {
  const auto& rows = ppmoe_t2_rows();
  std::vector<double> tput;  // 0 where it does not fit
  for (const T2Row& r : rows) {
    const StepPrediction p = predict_step(t2_model(r), t2_layout(r, hw), hw);
    tput.push_back(p.fits ? p.tokens_per_s_per_gpu : 0.0);
  }
  auto name = [&](int i) {
    const T2Row& r = rows[i];
    return r.model + " DP" + std::to_string(r.dp) + " TP" + std::to_string(r.tp) + " PP" + std::to_string(r.pp) + " (" +
           (tput[i] > 0 ? fmt(tput[i], 4) : std::string("OOM")) + ")";
  };
  std::vector<Ordering> out;
  auto above = [&](const std::string& claim, int hi, std::vector<int> lows) {
    bool ok = true;
    std::string d = name(hi);
    d += " vs";
    for (int lo : lows) {
      ok = ok && tput[hi] > tput[lo];
      d.append(" ").append(name(lo));
    }
    out.push_back({claim, ok, d});
  };
  above("small setting: PPMoE above every DPMoE row", 5, {3, 4});
  above("large setting: PPMoE above every DPMoE row", 12, {9, 10, 11});
  above("small setting: DP + EP above DP + TP8 + EP", 3, {4});
  above("large setting: DP + EP above DP + TP8 + EP", 9, {11});
  above("large setting: 143B DPMoE with TP = 2 best of the DPMoE rows", 10, {9, 11});
  // 000 Sec. 4.3: the 143B DPMoE "is not able to fit into 16 nodes (128 V100 GPUs) without
  // involving tensor parallel".
  T2Row r128 = rows[9];
  r128.dp = 128;
  r128.gpus = 128;
  const bool oom = !predict_step(t2_model(r128), t2_layout(r128, hw), hw).fits;
  out.push_back({"143B DPMoE DP128 (no TP) does not fit on 128 GPUs", oom, oom ? "modelled: OOM" : "modelled: fits"});
  return out;
}

ProjectedTable project_ppmoe_t2_orderings(const HardwareProfile& hw) {
  ProjectedTable out{CsvTable({"claim", "reproduced", "modelled_tokens_per_s_per_gpu", "calibration"}), {}};
  int ok = 0;
  const auto all = ppmoe_t2_orderings(hw);
  for (const Ordering& o : all) {
    out.table.add_row({o.claim, o.reproduced ? "yes" : "no", o.detail, kCalibration});
    ok += o.reproduced;
  }
  out.summary.push_back("ppmoe.t2 orderings (modelled): " + std::to_string(ok) + " of " + std::to_string(all.size()) +
                        " of 000's reproduced (target: all)");
  return out;
}

// A forward-step breakdown (000 Tables 1 and 3): each column's modelled share of the forward
// beside the paper's, for Table 2's row `row`.
// `table` is "ppmoe.t1" or "ppmoe.t3": the paper's milliseconds are 000.<t1|t3>.<column>.ms.
static ProjectedTable project_breakdown(const HardwareProfile& hw, const T2Row& r,
                                        const std::vector<std::pair<std::string, double>>& modelled,
                                        const std::string& table, const std::string& scope) {
  std::vector<std::tuple<std::string, double, double>> cols;
  for (const auto& [name, v] : modelled)
    cols.emplace_back(name, v, paper_number("000." + table.substr(table.find('.') + 1) + "." + name + ".ms"));
  const StepLayout l = t2_layout(r, hw);
  const double total = std::get<1>(cols.front()), paper_total = std::get<2>(cols.front());
  ProjectedTable out{CsvTable({"column", "modelled_ms", "modelled_pct", "paper_ms", "paper_pct", "pct_points_off",
                               "within_5_points", "modelled_over_paper_ms", "miss", "layout", "assumptions", "calibration"}),
                     {}};
  // Which term is off: a column's modelled time over the paper's, against the whole forward's;
  // the summary names the share modelled low whose time is shortest against the paper's.
  const double whole = total * l.micro_batches * 1e3 / paper_total;
  int within = 0;
  std::string most_off;
  double most_off_by = 0;
  for (const auto& [name, v, paper] : cols) {
    const double mp = 100 * v / total, pp = 100 * paper / paper_total, ms = v * l.micro_batches * 1e3;
    const bool ok = std::fabs(mp - pp) <= 5;
    within += ok;
    const double ratio = ms / paper;
    std::string miss = "-";
    if (!ok) {
      miss = std::string("share ") + (mp < pp ? "low" : "high") + " by " + fmt(std::fabs(mp - pp), 3) +
             " points: this term modelled at " + fmt(ratio, 3) + "x the paper's time, the whole forward at " + fmt(whole, 3) + "x";
      if (mp < pp && (most_off.empty() || ratio < most_off_by)) {  // the shortest of the shares modelled low
        most_off_by = ratio;
        most_off = name + " (" + fmt(ratio, 3) + "x the paper's time; the whole forward " + fmt(whole, 3) + "x)";
      }
    }
    out.table.add_row({name, fmt(ms, 5), fmt(mp, 4), fmt(paper), fmt(pp, 4), fmt(mp - pp, 3), ok ? "yes" : "no",
                       fmt(ratio, 4), miss, l.describe(), t2_assumptions(r, l) + "; " + scope, kCalibration});
  }
  out.summary.push_back(table + " (modelled): " + std::to_string(within) + " of " + std::to_string(cols.size()) +
                        " columns within 5 percentage points of the paper's" +
                        (most_off.empty() ? std::string() : "; the term modelled shortest against the paper: " + most_off));
  return out;
}

ProjectedTable project_ppmoe_t1(const HardwareProfile& hw) {
  // 000 Table 1: a forward step of the 143B DPMoE (6.7B backbone), DP + EP: Table 2's DP256 row.
  const T2Row& r = ppmoe_t2_rows()[9];
  const ForwardParts f = predict_step(t2_model(r), t2_layout(r, hw), hw).forward;
  return project_breakdown(hw, r,
                           {{"total_fwd", f.total()}, {"moe_fwd", f.moe()}, {"first_all_to_all", f.moe_dispatch},
                            {"second_all_to_all", f.moe_combine}, {"gating", f.moe_gating}, {"others", f.total() - f.moe()}},
                           "ppmoe.t1", "forward of every micro-batch");
}

ProjectedTable project_ppmoe_t3(const HardwareProfile& hw) {
  // 000 Table 3: a forward step of the small-setting PPMoE (TP8 PP4), one process (stage).
  const T2Row& r = ppmoe_t2_rows()[5];
  const ForwardParts f = predict_step(t2_model(r), t2_layout(r, hw), hw).forward;
  return project_breakdown(hw, r,
                           {{"total_fwd", f.total()}, {"moe_fwd", f.moe()}, {"gating", f.moe_gating},
                            {"expert_calc", f.moe_expert}, {"moe_allreduce", f.moe_combine},
                            {"ffn_fwd", f.ffn + f.ffn_allreduce}, {"ffn_allreduce", f.ffn_allreduce}},
                           "ppmoe.t3", "the slowest stage's forward of every micro-batch");
}

ProjectedTable project_m6t_t1(const HardwareProfile& hw) {
  struct Routing {
    const char* name;
    int prototypes, k;
    const char* paper_key;  // experiments/reference/values.csv: 001.t1.<3layer|16layer>.<key>
  };
  const Routing routings[] = {{"top-1", 1, 1, "top1"}, {"top-4", 1, 4, "top4"}, {"top-16", 1, 16, "top16"},
                              {"4 top-4", 4, 4, "4top4"}};
  auto paper_ms = [](int layers, const char* key) {
    return paper_number("001.t1." + std::to_string(layers) + "layer." + key);
  };
  ProjectedTable out{CsvTable({"layers", "routing", "gate", "modelled_ms_per_step", "modelled_ratio_vs_top1",
                               "paper_ms_per_step", "paper_ratio_vs_top1", "ratio_model_over_paper", "gating_share",
                               "assumptions", "calibration"}),
                     {}};
  const char* assumptions =
      "8 GPUs DP = EP 8, 8 sequences of 512 tokens per GPU (001 gives no sequence length), capacity 1.25, fp16 with an "
      "fp32 gate, experts as one batched einsum; M6-T's gate builds its [T, E, C] tensors once (O(K), 001 Sec. 3.3)";
  for (int layers : {3, 16})
    for (bool paper_gate : {true, false}) {
      double top1 = 0;
      for (const Routing& rt : routings) {
        ModelShape m = model_spec(layers == 3 ? "m6t-3layer" : "m6t-16layer").shape;
        m.seq = 512;  // 001 gives none
        m.prototypes = rt.prototypes;
        m.top_k = rt.k;
        StepLayout l;
        l.paper_gate = paper_gate;
        l.combine_per_round = false;  // M6-T's own, linear in k (step_model.h)
        l.batched_experts = true;
        l.kind = LayoutKind::dpmoe;
        l.dp = 8;
        l.micro_batch_sequences = 8;
        const StepPrediction p = predict_step(m, l, hw);
        if (rt.k == 1 && rt.prototypes == 1) top1 = p.step;
        const double paper = paper_ms(layers, rt.paper_key), paper_top1 = paper_ms(layers, "top1");
        const double ratio = p.step / top1, paper_ratio = paper / paper_top1;
        out.table.add_row({std::to_string(layers), rt.name, paper_gate ? "paper (looped arg-max, one-hot einsums)" : "ours (fused)",
                           fmt(p.step * 1e3, 4), fmt(ratio, 4), fmt(paper), fmt(paper_ratio, 4),
                           fmt(p.step * 1e3 / paper, 3), fmt(p.forward.moe_gating / p.forward.total(), 3), assumptions,
                           kCalibration});
      }
    }
  out.summary.push_back("m6t.t1 (modelled on " + hw.name + ")");
  return out;
}

ProjectedTable project_parameter_counts() {
  ProjectedTable out{CsvTable({"model", "source", "layers", "hidden", "ffn", "experts", "moe_every", "vocab", "seq",
                               "parameters", "paper_parameters", "parameters_over_paper", "note"}),
                     {}};
  struct Count {
    const char* spec;
    bool dense;
    const char* paper_id;
  };
  // GPT-3 Medium itself, and 000's two MoE models (64 experts on every other FFN); 001 Table 3.
  const Count counts[] = {{"gpt3-medium", true, "000.s41.medium.parameters"},
                          {"gpt3-medium", false, "000.s41.small.parameters"},
                          {"gpt3-6.7b", false, "000.s41.large.parameters"},
                          {"m6t-3layer", false, "001.t3.3layer.parameters"},
                          {"m6t-16layer", false, "001.t3.16layer.parameters"},
                          {"m6t-100b", false, "001.t3.100b.parameters"},
                          {"m6t-1t", false, "001.t3.1t.parameters"}};
  for (const Count& c : counts) {
    const ModelSpec& spec = model_spec(c.spec);
    const ModelShape m = c.dense ? spec.shape.dense() : spec.shape;
    const double params = m.parameters(), paper = paper_number(c.paper_id);
    out.table.add_row({std::string(c.spec) + (c.dense ? " (dense)" : ""), spec.source, std::to_string(m.layers),
                       std::to_string(m.hidden), std::to_string(m.ffn), std::to_string(m.experts), std::to_string(m.moe_every),
                       std::to_string(m.vocab), std::to_string(m.seq), fmt(params, 5), fmt(paper, 5), fmt(params / paper, 4),
                       "embeddings (the output layer tied), attention, FFN or experts and gate, LayerNorms; vocabulary: " +
                           spec.vocab_source + (m.seq == 0 ? "; no position embeddings counted (no sequence length given)" : "")});
  }
  out.summary.push_back("models.params: the papers' parameter counts from models/'s specs");
  return out;
}

ProjectedTable project_m6t_layer_flops() {
  // 001 A.3: per token, an MoE FFN layer's forward runs the two expert matmuls over capacity
  // slots (gamma per token at top-1: 2 x 2 M I gamma) and the gate's projection (2 M E).
  ProjectedTable out{CsvTable({"model", "hidden", "ffn", "experts", "capacity_factor", "expert_matmul_flops_per_token",
                               "gate_flops_per_token", "expert_matmul_share_pct", "paper_expert_matmul_share_pct", "note"}),
                     {}};
  for (const char* name : {"m6t-3layer", "m6t-16layer", "m6t-100b", "m6t-1t"}) {
    const ModelSpec& spec = model_spec(name);
    const double m = spec.shape.hidden, i = spec.shape.ffn, e = spec.shape.experts, gamma = spec.shape.capacity_factor;
    const double experts = 4 * m * i * gamma, gate = 2 * m * e;
    const bool paper = std::string(name) == "m6t-1t";
    out.table.add_row({name, fmt(m, 6), fmt(i, 6), fmt(e, 6), fmt(gamma, 3), fmt(experts, 6), fmt(gate, 6),
                       fmt(100 * experts / (experts + gate), 4),
                       paper ? fmt(paper_number("001.a3.matmul_share_1t"), 3) : "n/a",
                       "top-1; the share of expert matmuls and gate projection (2 gamma I / (2 gamma I + E), whatever the "
                       "tokens); Fig. 7's dispatch and combine written as dense einsums over [T, E, C] would add 4 gamma T M "
                       "per token for T tokens per GPU, which 001 does not give (its sequence length is not stated), and "
                       "would keep the share below the paper's for any T above about 50: the paper's share leaves them out"});
  }
  out.summary.push_back("models.m6t_flops: 001 A.3's share of the expert matmuls in an MoE FFN layer's forward FLOPs");
  return out;
}

}  // namespace moebench
