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

namespace moebench {
namespace {

constexpr int kVocab = 50304;  // GPT-2's BPE padded as Megatron pads it; 000 does not give one
constexpr const char* kCalibration =
    "calibrated from hardware data and the suite's micro-benchmarks only; nothing fitted to the paper";

ModelShape from_spec(const ModelSpec& s, int seq) {
  ModelShape m;
  m.layers = s.layers;
  m.hidden = s.hidden;
  m.ffn = s.ffn;
  m.heads = s.heads;
  m.seq = seq > 0 ? seq : s.seq;
  m.vocab = kVocab;
  return m;
}

std::string pct(double v) { return fmt(100 * v, 4); }

}  // namespace

const std::vector<T2Row>& ppmoe_t2_rows() {
  using K = StepLayoutKind;
  static const std::vector<T2Row> rows = {
      {"0.3B Dense", K::dense, 1, 8, 4, 1, false, 32, 3244, "small"},
      {"0.3B Dense", K::dense, 4, 8, 1, 1, true, 32, 4174, "small"},
      {"0.3B Dense", K::dense, 32, 1, 1, 1, true, 32, 5120, "small"},
      {"6.7B DPMoE", K::dpmoe, 32, 1, 1, 64, true, 32, 2147, "small"},
      {"6.7B DPMoE", K::dpmoe, 4, 8, 1, 64, true, 32, 218, "small"},
      {"6.7B PPMoE", K::ppmoe, 1, 8, 4, 64, false, 32, 2708, "small"},
      {"6.7B Dense", K::dense, 1, 8, 16, 1, false, 128, 356, "large"},
      {"6.7B Dense", K::dense, 16, 8, 1, 1, true, 128, 597, "large"},
      {"6.7B Dense", K::dense, 128, 1, 1, 1, true, 128, 410, "large"},
      {"143B DPMoE", K::dpmoe, 256, 1, 1, 64, true, 256, 93, "large"},
      {"143B DPMoE", K::dpmoe, 128, 2, 1, 64, true, 256, 183, "large"},
      {"143B DPMoE", K::dpmoe, 32, 8, 1, 64, true, 256, 63, "large"},
      {"143B PPMoE", K::ppmoe, 1, 8, 16, 64, false, 128, 323, "large"},
  };
  return rows;
}

// GPT-3's batch sizes (Brown et al. 2020, Table 2.1: 0.5M tokens for Medium, 2M for 6.7B): 000
// gives none.
static int global_sequences(const T2Row& r) { return r.setting == "small" ? 256 : 1024; }

ModelShape t2_model(const T2Row& r) {
  const ModelSpec& spec = model_spec(r.setting == "small" ? "gpt3-medium" : "gpt3-6.7b");
  ModelShape m = from_spec(spec, 0);
  if (r.kind != StepLayoutKind::dense) {
    m.experts = spec.experts;
    m.moe_every = spec.moe_every;
    m.top_k = 1;
  }
  return m;
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
  if (r.kind == StepLayoutKind::dpmoe)
    return s + "; the all-to-all term: modelled " + pct((f.moe_dispatch + f.moe_combine) / f.total()) +
           "% of the forward, 000 Table 1 measured 65.5%";
  if (r.tp > 1)
    return s + "; the TP all-reduce term: modelled " + pct((f.attention_allreduce + f.ffn_allreduce + f.moe_combine) / f.total()) +
           "% of the forward, 000 Table 3 measured 39.5% (MoE and FFN all-reduces)";
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
    if (r.kind != StepLayoutKind::dense) continue;
    if (!base_paper.count(r.setting) || r.paper_throughput < base_paper[r.setting]) {
      base_paper[r.setting] = r.paper_throughput;
      base_model[r.setting] = pred[i].tokens_per_s_per_gpu;
    }
  }
  int within = 0, rows = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) {
    const T2Row& r = ppmoe_t2_rows()[i];
    const StepPrediction& p = pred[i];
    const double ratio_m = p.tokens_per_s_per_gpu / base_model[r.setting];
    const double ratio_p = r.paper_throughput / base_paper[r.setting];
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
                       p.fits ? fmt(p.tokens_per_s_per_gpu, 4) : "OOM", fmt(r.paper_throughput),
                       p.fits ? fmt(p.tokens_per_s_per_gpu / r.paper_throughput, 3) : "n/a", fmt(ratio_m, 3),
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
static ProjectedTable project_breakdown(const HardwareProfile& hw, const T2Row& r,
                                        const std::vector<std::tuple<std::string, double, double>>& cols,
                                        const std::string& table, const std::string& scope) {
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
                           {{"total_fwd", f.total(), 7617}, {"moe_fwd", f.moe(), 6294},
                            {"first_all_to_all", f.moe_dispatch, 2566}, {"second_all_to_all", f.moe_combine, 2423},
                            {"gating", f.moe_gating, 156}, {"others", f.total() - f.moe(), 1323}},
                           "ppmoe.t1", "forward of every micro-batch");
}

ProjectedTable project_ppmoe_t3(const HardwareProfile& hw) {
  // 000 Table 3: a forward step of the small-setting PPMoE (TP8 PP4), one process (stage).
  const T2Row& r = ppmoe_t2_rows()[5];
  const ForwardParts f = predict_step(t2_model(r), t2_layout(r, hw), hw).forward;
  return project_breakdown(hw, r,
                           {{"total_fwd", f.total(), 6257}, {"moe_fwd", f.moe(), 2393}, {"gating", f.moe_gating, 491},
                            {"expert_calc", f.moe_expert, 437}, {"moe_allreduce", f.moe_combine, 1294},
                            {"ffn_fwd", f.ffn + f.ffn_allreduce, 1714}, {"ffn_allreduce", f.ffn_allreduce, 1176}},
                           "ppmoe.t3", "the slowest stage's forward of every micro-batch");
}

ProjectedTable project_m6t_t1(const HardwareProfile& hw) {
  struct Routing {
    const char* name;
    int prototypes, k;
    double paper3, paper16;
  };
  const Routing routings[] = {{"top-1", 1, 1, 98, 436}, {"top-4", 1, 4, 199, 975}, {"top-16", 1, 16, 600, 3100},
                              {"4 top-4", 4, 4, 203, 980}};
  ProjectedTable out{CsvTable({"layers", "routing", "gate", "modelled_ms_per_step", "modelled_ratio_vs_top1",
                               "paper_ms_per_step", "paper_ratio_vs_top1", "ratio_model_over_paper", "gating_share",
                               "assumptions", "calibration"}),
                     {}};
  const char* assumptions =
      "8 GPUs DP = EP 8, 8 sequences of 512 tokens per GPU (001 gives no sequence length), capacity 1.25, fp16 with an "
      "fp32 gate, experts as one batched einsum";
  for (int layers : {3, 16})
    for (bool paper_gate : {true, false}) {
      double top1 = 0;
      for (const Routing& rt : routings) {
        ModelShape m = from_spec(model_spec(layers == 3 ? "m6t-3layer" : "m6t-16layer"), 512);
        m.experts = 4096;
        m.moe_every = 1;
        m.prototypes = rt.prototypes;
        m.top_k = rt.k;
        m.capacity_factor = 1.25;
        m.paper_gate = paper_gate;
        m.batched_experts = true;
        StepLayout l;
        l.kind = StepLayoutKind::dpmoe;
        l.dp = 8;
        l.micro_batch_sequences = 8;
        const StepPrediction p = predict_step(m, l, hw);
        if (rt.k == 1 && rt.prototypes == 1) top1 = p.step;
        const double paper = layers == 3 ? rt.paper3 : rt.paper16, paper_top1 = layers == 3 ? 98 : 436;
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

namespace {

// A results CSV read by column name (fields trimmed, quoted as the suite writes them).
template <unsigned Columns>
using CsvIn = io::CSVReader<Columns, io::trim_chars<' '>, io::double_quote_escape<',', '"'>>;

// A local run's model shape, as its CSV gives it.
ModelShape gpt_shape(int layers, int hidden, int ffn, int heads, int seq, int vocab) {
  ModelShape m;
  m.layers = layers;
  m.hidden = hidden;
  m.ffn = ffn;
  m.heads = heads;
  m.seq = seq;
  m.vocab = vocab;
  return m;
}

// The `device` provenance column of a CSV's first row ("" where the file has none: a shipped
// profile, say).
std::string device_of(const std::string& path) {
  CsvIn<1> in(path);
  in.read_header(io::ignore_extra_column | io::ignore_missing_column, "device");
  if (!in.has_column("device")) return "";
  std::string device;
  return in.read_row(device) ? device : "";
}

// The local runs left out, and why; `device` is the machine the profile was measured on.
struct NotCompared {
  std::string device;
  std::vector<std::string> lines;
  void push_back(std::string why) { lines.push_back(std::move(why)); }
};

// Whether a results file is there and was measured on the profile's machine; if not, it is
// named among the runs not compared (a profile predicts the machine it was measured on only).
bool present(const std::string& path, NotCompared& missing) {
  if (!std::filesystem::exists(path)) {
    missing.push_back(path + " (no such file)");
    return false;
  }
  const std::string ran_on = device_of(path);
  if (!missing.device.empty() && !ran_on.empty() && ran_on != missing.device) {
    missing.push_back(path + " (measured on " + ran_on + "; the profile is of " + missing.device + ")");
    return false;
  }
  return true;
}

// "emulated: 0.05 GB/s, 10 us" -> the profile with that link inside (and between) nodes, as
// the runtime emulates it on top of MPI: where the profile has MPI's own times of a collective,
// the later of those and the link's.
HardwareProfile with_link(HardwareProfile hw, const std::string& link) {
  double bw = 0, us = 0;
  if (std::sscanf(link.c_str(), "emulated: %lf GB/s, %lf us", &bw, &us) == 2) {
    hw.intra_bw = hw.inter_bw = bw * 1e9;
    hw.intra_latency = hw.inter_latency = us * 1e-6;
    hw.emulated_link = HardwareProfile::EmulatedLink{us * 1e-6, bw * 1e9};
  }
  return hw;
}

// Whether a results CSV read with optional columns has every one of `required`; if not, it is
// named among the runs not compared.
template <unsigned Columns>
bool has_columns(const CsvIn<Columns>& in, std::initializer_list<const char*> required, const std::string& path,
                 NotCompared& missing) {
  for (const char* c : required)
    if (!in.has_column(c)) {
      missing.push_back(path + " (no column '" + c + "': re-run it)");
      return false;
    }
  return true;
}

// A run's `expert_rows_max_over_mean` cell into `l` ("-": none measured, even routing kept);
// false, with the file named among those not compared, where it is no number.
bool read_expert_load(const std::string& cell, const std::string& path, StepLayout& l, NotCompared& missing) {
  if (cell == "-") return true;
  char* end = nullptr;
  l.expert_load = std::strtod(cell.c_str(), &end);
  if (end != cell.c_str() && *end == '\0') return true;
  missing.push_back(path + " (a row's expert_rows_max_over_mean '" + cell + "' is not a number)");
  return false;
}

struct Comparison {
  std::string experiment, what, link;
  double modelled_ms, measured_ms;
  std::string off = "-";  // what the model lacks for this row, where a run shows it
};

// Where the model's error is above this, the row says which term is off.
constexpr double kMissNamed = 0.10;

// The comm bench's sizes; those the profile measured itself (its collective times, at the same
// ranks, on the real link) are left out: the model is checked on the sizes in between.
void compare_comm(const HardwareProfile& hw, const std::string& dir, std::vector<Comparison>& out,
                  NotCompared& missing) {
  for (const std::string& c : profiled_collectives()) {
    const std::string path = dir + "/" + c + ".csv";
    if (!present(path, missing)) continue;
    CsvIn<5> in(path);
    in.read_header(io::ignore_extra_column, "collective", "size_bytes", "time_us", "ranks", "link");
    std::string name, link;
    double bytes = 0, us = 0;
    int ranks = 0, seen = 0;
    double seen_apart = 0;  // sum of |profile's time / comm bench's - 1| at those sizes
    const std::size_t first_row = out.size();
    while (in.read_row(name, bytes, us, ranks, link)) {
      const HardwareProfile h = with_link(hw, link);
      if (const auto it = h.collective_seconds.find(name);
          !h.emulated_link && it != h.collective_seconds.end() && ranks == h.gpus_per_node) {
        const auto point = std::find_if(it->second.begin(), it->second.end(), [&](const auto& p) { return p.first == bytes; });
        if (point != it->second.end()) {
          ++seen;
          seen_apart += std::fabs(point->second / (us * 1e-6) - 1);
          continue;
        }
      }
      const Placement g = place_group(h, ranks);
      double s = 0;
      if (name == "all_reduce") s = all_reduce_seconds(h, bytes, g);
      else if (name == "all_to_all") s = all_to_all_seconds(h, bytes, g);
      else if (name == "all_gather") s = all_gather_seconds(h, bytes, g);
      else if (name == "reduce_scatter") s = reduce_scatter_seconds(h, bytes, g);
      else s = send_recv_seconds(h, bytes, false);
      out.push_back({"comm", name + " " + fmt(bytes, 8) + " B, " + std::to_string(ranks) + " ranks", link, s * 1e3, us / 1e3});
    }
    const double apart = seen > 0 ? seen_apart / seen : 0;
    for (std::size_t i = first_row; i < out.size(); ++i) {
      Comparison& r = out[i];
      if (std::fabs(r.modelled_ms / r.measured_ms - 1) <= kMissNamed) continue;
      r.off = r.link.rfind("emulated", 0) == 0
                  ? "emulated link: the model takes the later of MPI's own time and the link's; the run is above both (not diagnosed)"
                  : "between the profile's measured sizes (the line through the nearest two; MPI changes algorithm between sizes)" +
                        (seen > 0 ? "; at the profile's own sizes this run and the profile's are " + fmt(100 * apart, 3) +
                                        "% apart (run-to-run)"
                                  : std::string());
    }
    if (seen > 0)
      missing.push_back(path + ": " + std::to_string(seen) + (seen == 1 ? " size" : " sizes") +
                        " the profile measured itself (checked on the sizes between); there the two runs' times are " +
                        fmt(100 * seen_apart / seen, 3) + "% apart on average (the measurement's own run-to-run spread)");
  }
}

// MPMoE's layer (forward + backward) as FastMoE (no split) and as MPMoE-pb ran it (its n and
// strategy), through MPMoE's performance model on this machine's profile.
void compare_mpmoe(const HardwareProfile& hw, const std::string& path, std::vector<Comparison>& out,
                   NotCompared& missing) {
  if (!present(path, missing)) return;
  CsvIn<8> in(path);
  in.read_header(io::ignore_extra_column, "model", "tokens", "fastmoe_ms", "pb_ms", "pb_n", "pb_strategy", "ranks", "link");
  std::string model, strategy, link;
  int tokens, n, ranks;
  double fast, pb;
  while (in.read_row(model, tokens, fast, pb, n, strategy, ranks, link)) {
    const auto& specs = moe_layer_specs();
    if (std::none_of(specs.begin(), specs.end(), [&](const MoELayerSpec& m) { return m.name == model; })) {
      missing.push_back(path + " (its '" + model + "' layer is none of 003's)");
      continue;
    }
    const MoELayerSpec& spec = moe_layer_spec(model);
    const MoELayerRun r{spec.hidden, spec.ffn, ranks, tokens, false};
    const HardwareProfile h = with_link(hw, link);
    const std::string what = model + " B=" + std::to_string(tokens);
    out.push_back({"mpmoe", what + " FastMoE-style", link, fastmoe_ms(r, h), fast});
    out.push_back({"mpmoe", what + " MPMoE-pb n=" + std::to_string(n) + " " + strategy, link, mpmoe_layer_ms(r, n, strategy, h), pb});
  }
}

// ppmoe.t1 / t3: one forward of the MoE model on one stage, its total and its MoE layers' part.
// The run's collectives (t1: the two all-to-alls; t3: the MoE and FFN all-reduces) against the
// model's of the same sizes name the term a miss comes from: the time a rank spends in them
// past the collective's own cost is waiting for ranks that share its cores.
void compare_breakdown(const HardwareProfile& hw, const std::string& path, const char* experiment, bool ppmoe,
                       std::vector<Comparison>& out, NotCompared& missing) {
  if (!present(path, missing)) return;
  CsvIn<17> in(path);
  in.read_header(io::ignore_extra_column | io::ignore_missing_column, "dp", "tp", "layers", "hidden", "ffn", "heads", "seq",
                 "vocab", "experts", "sequences_per_rank", "total_fwd_ms", "moe_fwd_ms", "link", "layout",
                 "expert_rows_max_over_mean", ppmoe ? "moe_allreduce_ms" : "first_all_to_all_ms",
                 ppmoe ? "ffn_allreduce_ms" : "second_all_to_all_ms");
  if (!has_columns(in, {"dp", "tp", "layers", "hidden", "ffn", "heads", "seq", "vocab", "experts", "sequences_per_rank",
                        "total_fwd_ms", "moe_fwd_ms", "link", "layout"},
                   path, missing))
    return;
  const bool has_comm = in.has_column(ppmoe ? "moe_allreduce_ms" : "first_all_to_all_ms") &&
                        in.has_column(ppmoe ? "ffn_allreduce_ms" : "second_all_to_all_ms");
  int dp, tp, layers, hidden, ffn, heads, seq, vocab, experts, sequences;
  double total, moe, comm_a = 0, comm_b = 0;
  std::string expert_load = "-";  // a run without the column: even routing
  std::string link, layout;
  while (in.read_row(dp, tp, layers, hidden, ffn, heads, seq, vocab, experts, sequences, total, moe, link, layout, expert_load,
                     comm_a, comm_b)) {
    ModelShape m = gpt_shape(layers, hidden, ffn, heads, seq, vocab);
    m.experts = experts; m.moe_every = 2;
    StepLayout l;
    l.kind = ppmoe ? StepLayoutKind::ppmoe : StepLayoutKind::dpmoe;
    l.dp = dp; l.tp = tp;
    l.micro_batch_sequences = sequences;
    l.half = false;
    if (!read_expert_load(expert_load, path, l, missing)) continue;  // the run's own routing
    const HardwareProfile h = with_link(hw, link);
    if (validate_step(m, l, h)) continue;
    const ForwardParts f = predict_step(m, l, h).forward;
    std::string off = "-";
    const double run_comm = comm_a + comm_b, model_comm = (f.moe_comm + (ppmoe ? f.ffn_allreduce : 0)) * 1e3;
    if (has_comm && run_comm > 2 * model_comm)
      off = std::string("not modelled: waits at collectives -- the run's ") +
            (ppmoe ? "MoE and FFN all-reduces" : "two all-to-alls") + " took " + fmt(run_comm, 3) + " ms, the model's " +
            fmt(model_comm, 3) + " ms (their own cost at these sizes); the rest is ranks waiting for ranks that share their cores";
    const auto add = [&](const std::string& what, double modelled, double measured) {
      out.push_back({experiment, what, link, modelled, measured,
                     std::fabs(modelled / measured - 1) > kMissNamed ? off : std::string("-")});
    };
    add(layout + " forward", f.total() * 1e3, total);
    add(layout + " MoE layers' forward", f.moe() * 1e3, moe);
  }
}

// One MoE layer's forward + backward (moe.layer: local, expert-parallel or PPMoE over the run's
// ranks), fp32: the fp32 gate, the local experts as serial GEMMs, the permutations, and the
// dispatcher's communication -- four all-to-alls (expert parallel) or two all-reduces (PPMoE).
double moe_layer_ms(const HardwareProfile& hw, const std::string& dispatcher, int tokens, int hidden, int ffn, int experts,
                    int top_k, int ranks) {
  const double T = tokens, h = hidden, f = ffn, k = top_k;
  const bool ep = dispatcher == "expert_parallel", pp = dispatcher == "ppmoe";
  const int local = ep || pp ? experts / ranks : experts;
  const double rows = pp ? T * k / ranks : T * k, per_expert = rows / local;
  const double gate = 3 * hw.gemm_seconds(2 * T * h * experts, false) + 4 * T * experts * 4 / hw.elementwise_bw;
  const double up = hw.gemm_seconds(2 * per_expert * h * f, false);
  const double experts_s = local * 6 * up + 3 * 2 * rows * f * 4 / hw.elementwise_bw;  // 2 GEMMs forward, 4 backward
  const double moves = 4 * 2 * rows * h * 4 / hw.memory_bw;
  const Placement g = place_group(hw, ranks);
  double comm = 0;
  if (ep) comm = 4 * all_to_all_seconds(hw, T * k * h * 4, g) + all_reduce_seconds(hw, h * experts * 4, g);
  if (pp) comm = 2 * all_reduce_seconds(hw, T * h * 4, g) + all_reduce_seconds(hw, h * experts * 4, g);
  return (gate + experts_s + moves + comm) * 1e3;
}

void compare_moe_layer(const HardwareProfile& hw, const std::string& dir, std::vector<Comparison>& out,
                       NotCompared& missing) {
  for (const char* d : {"local", "expert_parallel", "ppmoe"}) {
    const std::string path = dir + "/layer_" + d + ".csv";
    if (!present(path, missing)) continue;
    CsvIn<9> in(path);
    in.read_header(io::ignore_extra_column, "dispatcher", "tokens_per_rank", "hidden", "ffn", "experts", "top_k",
                   "total_ms", "ranks", "link");
    std::string dispatcher, link;
    int tokens, hidden, ffn, experts, k, ranks;
    double ms;
    while (in.read_row(dispatcher, tokens, hidden, ffn, experts, k, ms, ranks, link)) {
      if (ranks != hw.gpus_per_node) {  // the profile's compute rate holds for its own rank count
        missing.push_back(path + " (ran on " + std::to_string(ranks) + " ranks; the profile was measured on " +
                          std::to_string(hw.gpus_per_node) + " sharing this machine's cores)");
        continue;
      }
      if (dispatcher != "local" && (ranks < 1 || experts % ranks != 0)) continue;
      out.push_back({"moe.layer", dispatcher + " T=" + std::to_string(tokens) + " E=" + std::to_string(experts), link,
                     moe_layer_ms(with_link(hw, link), dispatcher, tokens, hidden, ffn, experts, k, ranks), ms});
    }
  }
}

// pipe.bubble: the simulator on the run's own op and send times (not the profile) against the
// measured step, once per run (stage 0's row).
void compare_pipe(const std::string& path, std::vector<Comparison>& out, NotCompared& missing) {
  if (!present(path, missing)) return;
  CsvIn<8> in(path);
  in.read_header(io::ignore_extra_column, "schedule", "stages", "micro_batches", "recompute", "stage", "step_ms",
                 "simulated_step_ms", "link");
  std::string schedule, recompute, link;
  int stages, micro, stage;
  double step, simulated;
  while (in.read_row(schedule, stages, micro, recompute, stage, step, simulated, link))
    if (stage == 0)
      out.push_back({"pipe.bubble (simulator on the run's op times)",
                     schedule + " P=" + std::to_string(stages) + " M=" + std::to_string(micro) +
                         (recompute == "yes" ? " recompute" : ""),
                     link, simulated, step});
}

// A training step's miss (ppmoe.t2's trainer): below the run, the term its traced runs show the
// model lacking (README, "Performance models", the model against this machine's runs); above
// it, none is named.
std::string step_off(double modelled, double measured) {
  const double r = modelled / measured;
  if (std::fabs(r - 1) <= kMissNamed) return "-";
  if (r > 1) return "model above the run: not diagnosed";
  return "not modelled: the ranks' idle time at collectives and between ops where ranks share cores (waiting for "
         "descheduled ranks and for host launches; see README)";
}

void compare_t2(const HardwareProfile& hw, const std::string& path, std::vector<Comparison>& out,
                NotCompared& missing) {
  if (!present(path, missing)) return;
  CsvIn<17> in(path);
  in.read_header(io::ignore_extra_column | io::ignore_missing_column, "model", "dp", "tp", "pp", "zero", "step_ms", "layers",
                 "hidden", "ffn", "heads", "seq", "vocab", "experts", "sequences_per_step", "micro_batches", "link",
                 "expert_rows_max_over_mean");
  if (!has_columns(in, {"model", "dp", "tp", "pp", "zero", "step_ms", "layers", "hidden", "ffn", "heads", "seq", "vocab",
                        "experts", "sequences_per_step", "micro_batches", "link"},
                   path, missing))
    return;
  std::string kind, zero, link, expert_load = "-";  // "-": a dense row, or a run without the column
  int dp, tp, pp, layers, hidden, ffn, heads, seq, vocab, experts, sequences, micro;
  double step_ms;
  while (in.read_row(kind, dp, tp, pp, zero, step_ms, layers, hidden, ffn, heads, seq, vocab, experts, sequences, micro, link,
                     expert_load)) {
    ModelShape m = gpt_shape(layers, hidden, ffn, heads, seq, vocab);
    StepLayout l;
    l.kind = kind == "Dense" ? StepLayoutKind::dense : kind == "DPMoE" ? StepLayoutKind::dpmoe : StepLayoutKind::ppmoe;
    if (l.kind != StepLayoutKind::dense) {
      m.experts = experts;
      m.moe_every = 2;
    }
    l.dp = dp; l.tp = tp; l.pp = pp; l.zero = zero == "yes";
    l.micro_batches = micro;
    l.micro_batch_sequences = std::max(1, sequences / dp / micro);
    l.half = false;
    if (!read_expert_load(expert_load, path, l, missing)) continue;  // the run's own routing
    const HardwareProfile h = with_link(hw, link);
    if (validate_step(m, l, h)) continue;
    const double modelled = predict_step(m, l, h).step * 1e3;
    out.push_back({"ppmoe.t2", l.describe(), link, modelled, step_ms, step_off(modelled, step_ms)});
  }
}

void compare_m6t(const HardwareProfile& hw, const std::string& path, std::vector<Comparison>& out,
                 NotCompared& missing) {
  if (!present(path, missing)) return;
  CsvIn<16> in(path);
  in.read_header(io::ignore_extra_column | io::ignore_missing_column, "layers", "routing", "prototypes", "top_k", "experts",
                 "hidden", "ffn", "heads", "seq", "tokens_per_rank", "gate", "ms_per_step", "ranks", "vocab", "link",
                 "expert_rows_max_over_mean");
  if (!has_columns(in, {"layers", "routing", "prototypes", "top_k", "experts", "hidden", "ffn", "heads", "seq",
                        "tokens_per_rank", "gate", "ms_per_step", "ranks", "vocab", "link"},
                   path, missing))
    return;
  std::string routing, gate, link, expert_load = "-";  // a run without the column: even routing
  int layers, prototypes, k, experts, hidden, ffn, heads, seq, tokens, ranks, vocab;
  double ms;
  while (in.read_row(layers, routing, prototypes, k, experts, hidden, ffn, heads, seq, tokens, gate, ms, ranks, vocab, link,
                     expert_load)) {
    ModelShape m = gpt_shape(layers, hidden, ffn, heads, seq, vocab);
    m.experts = experts; m.moe_every = 1; m.prototypes = prototypes; m.top_k = k;
    m.capacity_factor = 1.25;  // m6t.t1's
    m.paper_gate = gate.rfind("paper", 0) == 0;
    StepLayout l;
    l.kind = StepLayoutKind::dpmoe;
    l.dp = ranks;
    l.micro_batch_sequences = std::max(1, tokens / seq);
    l.half = false;
    // The run's own routing (capacity 1.25 drops some assignments; the load is of kept rows).
    if (!read_expert_load(expert_load, path, l, missing)) continue;
    const HardwareProfile h = with_link(hw, link);
    if (validate_step(m, l, h)) continue;
    const double modelled = predict_step(m, l, h).step * 1e3;  // its misses go both ways: none named
    out.push_back({"m6t.t1", std::to_string(layers) + " layers " + routing + ", " + (m.paper_gate ? "paper" : "fused") + " gate",
                   link, modelled, ms});
  }
}

}  // namespace

ProjectedTable ppmoe_equations_local(const HardwareProfile& hw, const std::string& dir) {
  ProjectedTable out{CsvTable({"equation", "run", "experts_or_tp", "job_ranks", "hidden", "eq_prediction", "model_prediction",
                               "measured", "eq_over_measured", "model_over_measured", "note", "calibration"}),
                     {}};
  auto row = [&](const char* eq_name, const std::string& run, int e_or_t, int ranks, int hidden, double eq, double model,
                 double measured, const std::string& note) {
    out.table.add_row({eq_name, run, std::to_string(e_or_t), std::to_string(ranks), std::to_string(hidden), fmt(eq, 4),
                       fmt(model, 4), fmt(measured, 4), fmt(eq / measured, 3), fmt(model / measured, 3), note,
                       "this machine's profile (" + hw.name + ")"});
  };
  NotCompared skipped{std::filesystem::exists(hw.path) ? device_of(hw.path) : "", {}};
  try {
    // Eq. 2 against the expert-parallel MoE layer: its two all-to-alls over its experts' forward.
    const std::string layer = dir + "/moe/layer_expert_parallel.csv";
    if (present(layer, skipped)) {
      CsvIn<10> in(layer);
      in.read_header(io::ignore_extra_column, "tokens_per_rank", "hidden", "ffn", "experts", "top_k", "moe.dispatch_ms",
                     "moe.expert_ms", "moe.combine_ms", "ranks", "link");
      int tokens, hidden, ffn, experts, k, ranks;
      double dispatch, expert, combine;
      std::string link;
      while (in.read_row(tokens, hidden, ffn, experts, k, dispatch, expert, combine, ranks, link)) {
        const HardwareProfile h = with_link(hw, link);
        const double a2a = 2 * all_to_all_seconds(h, double(tokens) * k * hidden * 4, place_group(h, ranks));
        const int local = experts / std::max(ranks, 1);
        const double ffn_s = local * 2 * h.gemm_seconds(2.0 * tokens * k / local * hidden * ffn, false);
        row("Eq. 2", "moe.layer expert_parallel, " + link, experts, ranks, hidden,
            ppmoe_eq2_a2a_over_ffn(experts, h.peak_fp32_flops, h.intra_bw, hidden), a2a / ffn_s, (dispatch + combine) / expert,
            "Eq. 2: (E - 1) E F / (16 B h), derived for E experts on E ranks (here " + std::to_string(experts) + " on " +
                std::to_string(ranks) + "); the profile's compute rate is that of 4 ranks on this machine's cores");
      }
    }
    // Eq. 5 against PPMoE's dense FFNs in ppmoe.t3: their all-reduce over their GEMMs.
    for (const std::string folder : {"/ppmoe", "/ppmoe_emulated/ppmoe"}) {
      const std::string path = dir + folder + "/t3.csv";
      if (!present(path, skipped)) continue;
      CsvIn<13> in(path);
      in.read_header(io::ignore_extra_column | io::ignore_missing_column, "dp", "tp", "layers", "hidden", "ffn", "heads",
                     "seq", "vocab", "experts", "sequences_per_rank", "link", "ffn_fwd_ms", "ffn_allreduce_ms");
      if (!in.has_column("sequences_per_rank")) continue;
      int dp, tp, layers, hidden, ffn, heads, seq, vocab, experts, sequences;
      std::string link;
      double ffn_ms, allreduce_ms;
      while (in.read_row(dp, tp, layers, hidden, ffn, heads, seq, vocab, experts, sequences, link, ffn_ms, allreduce_ms)) {
        const HardwareProfile h = with_link(hw, link);
        ModelShape m = gpt_shape(layers, hidden, ffn, heads, seq, vocab);
        m.experts = experts; m.moe_every = 2;
        StepLayout l;
        l.kind = StepLayoutKind::ppmoe;
        l.dp = dp; l.tp = tp; l.micro_batch_sequences = sequences; l.half = false;
        if (validate_step(m, l, h)) continue;
        const ForwardParts f = predict_step(m, l, h).forward;
        // ffn_fwd_ms is the FFN's GEMMs alone in this bench, ffn_allreduce_ms its all-reduce
        row("Eq. 5", "ppmoe.t3, " + link, tp, dp * tp, hidden, ppmoe_eq5_allreduce_over_calc(tp, h.peak_fp32_flops, h.intra_bw, hidden),
            f.ffn_allreduce / f.ffn, allreduce_ms / ffn_ms, "Eq. 5: (T - 1) T F / (4 B h), T = TP");
      }
    }
  } catch (const io::error::base& e) {
    throw Error(std::string("ppmoe.eq: reading the local results: ") + e.what());
  }
  out.summary.insert(out.summary.begin(), "ppmoe.eq: 000 Eq. 2 and Eq. 5 on this machine beside the measured ratios");
  for (const auto& m : skipped.lines) out.summary.push_back("  ppmoe.eq: not compared: " + m);
  return out;
}

ProjectedTable compare_local_runs(const HardwareProfile& hw, const std::string& dir) {
  std::vector<Comparison> rows;
  NotCompared missing{std::filesystem::exists(hw.path) ? device_of(hw.path) : "", {}};
  try {
    compare_comm(hw, dir + "/comm", rows, missing);
    compare_comm(hw, dir + "/comm_emulated/comm", rows, missing);
    compare_mpmoe(hw, dir + "/mpmoe/f10.csv", rows, missing);
    compare_moe_layer(hw, dir + "/moe", rows, missing);
    compare_pipe(dir + "/pipe/bubble.csv", rows, missing);
    compare_t2(hw, dir + "/ppmoe/t2.csv", rows, missing);
    compare_t2(hw, dir + "/ppmoe_emulated/ppmoe/t2.csv", rows, missing);
    compare_m6t(hw, dir + "/m6t/t1.csv", rows, missing);
    for (const std::string folder : {"/ppmoe", "/ppmoe_emulated/ppmoe"}) {
      compare_breakdown(hw, dir + folder + "/t1.csv", "ppmoe.t1", false, rows, missing);
      compare_breakdown(hw, dir + folder + "/t3.csv", "ppmoe.t3", true, rows, missing);
    }
  } catch (const io::error::base& e) {
    throw Error(std::string("reading the local results: ") + e.what());
  }
  ProjectedTable out{CsvTable({"experiment", "configuration", "run_link", "modelled_ms", "measured_ms", "model_over_measured",
                               "abs_error", "what_is_off", "calibration"}),
                     {}};
  double sum = 0, worst = 0;
  std::map<std::string, std::pair<double, int>> per;
  std::map<std::string, std::map<std::string, int>> misses;  // per experiment: the named terms' heads, counted
  for (const Comparison& c : rows) {
    const double err = std::fabs(c.modelled_ms / c.measured_ms - 1);
    sum += err;
    worst = std::max(worst, err);
    per[c.experiment].first += err;
    per[c.experiment].second += 1;
    const std::string off = c.off != "-" || err <= kMissNamed
                                ? c.off
                                : std::string(c.modelled_ms > c.measured_ms ? "model above" : "model below") + " the run: not diagnosed";
    if (err > kMissNamed) ++misses[c.experiment][off.substr(0, std::min({off.find(" --"), off.find(" ("), off.find(";")}))];
    out.table.add_row({c.experiment, c.what, c.link, fmt(c.modelled_ms, 5), fmt(c.measured_ms, 5),
                       fmt(c.modelled_ms / c.measured_ms, 4), fmt(err, 3),
                       off,
                       "this machine's profile (" + hw.name + "), from the suite's micro-benchmarks"});
  }
  char line[256];
  if (!rows.empty()) {
    std::snprintf(line, sizeof line, "model vs this machine's runs: %zu rows, mean error %.1f%%, worst %.1f%% (targets: <= 10%%, <= 20%%)",
                  rows.size(), 100 * sum / rows.size(), 100 * worst);
    out.summary.push_back(line);
  }
  for (const auto& [e, v] : per) {
    std::snprintf(line, sizeof line, "  %s: %d rows, mean error %.1f%%", e.c_str(), v.second, 100 * v.first / v.second);
    std::string text = line;
    for (const auto& [head, n] : misses[e]) text += "; " + std::to_string(n) + " over 10%: " + head;
    out.summary.push_back(text);
  }
  for (const auto& m : missing.lines) out.summary.push_back("  not compared: " + m);
  return out;
}

}  // namespace moebench
