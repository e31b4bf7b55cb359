#include "tools/mpmoe_projection.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include "models/collective_model.h"
#include "models/mpmoe_memory.h"
#include "models/paper_specs.h"
#include "models/paper_values.h"
#include "moe/granularity_search.h"

namespace moebench {
namespace {

constexpr const char* kAssumptions =
    "top-1, one expert per GPU (E = N), fp16 with tensor cores; slowdown factors alpha(y, x) from the profile (1 where it "
    "gives none); "
    "FasterMoE as one worker group per node, without memory reuse";

MoELayerRun layer_run(const std::string& model, int gpus, int tokens) {
  const MoELayerSpec& s = moe_layer_spec(model);
  return MoELayerRun{s.hidden, s.ffn, gpus, tokens, true};
}

}  // namespace

PartCosts mpmoe_part_costs(const MoELayerRun& r, int parts, const HardwareProfile& hw) {
  const double bytes = r.half ? 2.0 : 4.0, rows = double(r.tokens) / parts, h = r.hidden, f = r.ffn;
  const Placement g = place_group(hw, r.gpus);
  const double up = hw.gemm_seconds(2 * rows * h * f, r.half) * 1e3;  // one of the expert's two GEMMs
  const double gelu = 2 * rows * f * bytes / hw.elementwise_bw * 1e3;
  PartCosts c;
  c.comm = all_to_all_seconds(hw, rows * h * bytes, g) * 1e3;
  c.comp_fwd = 2 * up + gelu;
  c.comp_bwd = 4 * up + 2 * gelu;  // data and weight gradients of both GEMMs
  c.comp_middle = up;
  c.mem_rows = rows * h * bytes / hw.pcie_bw * 1e3;    // T_DI
  c.mem_middle = rows * f * bytes / hw.pcie_bw * 1e3;  // T_M
  return c;
}

double mpmoe_layer_ms(const MoELayerRun& r, int parts, const std::string& strategy, const HardwareProfile& hw) {
  const PartTimes t = part_times_under(strategy, mpmoe_part_costs(r, parts, hw));
  const Slowdowns alpha{hw.overlap_slowdown};
  return predict_forward(parts, t, alpha).ms + predict_backward(parts, t, alpha).ms;
}

MPMoEChoice mpmoe_best(const MoELayerRun& r, const HardwareProfile& hw, int max_parts) {
  return choose_granularity(1, max_parts, {"S1", "S2", "S3", "S4"},
                            [&](int n, const std::string& s) { return mpmoe_layer_ms(r, n, s, hw); });
}

double fastmoe_ms(const MoELayerRun& r, const HardwareProfile& hw) { return mpmoe_layer_ms(r, 1, "none", hw); }

double fastermoe_ms(const MoELayerRun& r, const HardwareProfile& hw) {
  // Worker groups of one node: step s exchanges the tokens for group (own + s) only -- each
  // rank sends B / groups rows to the group's k ranks, the node's k ranks sharing its link
  // (the own node's step over NVLink) -- while the experts compute the previous step's.
  const int k = std::max(1, std::min(hw.gpus_per_node, r.gpus)), groups = std::max(1, r.gpus / k);
  if (groups == 1) return mpmoe_layer_ms(r, 1, "none", hw);
  PartTimes t = part_times_under("none", mpmoe_part_costs(r, groups, hw));
  const double bytes = (r.half ? 2.0 : 4.0) * double(r.tokens) / groups * r.hidden;
  const double step = (k * hw.inter_latency + k * bytes / hw.inter_bw) * 1e3;
  t.s = t.r = t.s_bwd = t.r_bwd = step;
  const Slowdowns alpha{hw.overlap_slowdown};
  return predict_forward(groups, t, alpha).ms + predict_backward(groups, t, alpha).ms;
}

ProjectedTable project_mpmoe_f10(const HardwareProfile& hw, const std::string& cluster, int gpus) {
  ProjectedTable out{CsvTable({"cluster", "gpus", "model", "tokens_per_gpu", "fastmoe_ms", "fastermoe_ms", "mpmoe_ms",
                               "mpmoe_n", "mpmoe_strategy", "mpmoe_over_fastermoe", "mpmoe_over_fastmoe",
                               "paper_pm_over_fastermoe_mean", "paper_pm_over_fastmoe_mean", "assumptions", "calibration"}),
                     {}};
  double sum_faster = 0, sum_fast = 0;
  int rows = 0;
  for (const char* model : {"gpt-s", "gpt-xl", "bert-l"})
    for (int tokens : {2048, 4096, 8192, 16384}) {
      const MoELayerRun r = layer_run(model, gpus, tokens);
      const double fast = fastmoe_ms(r, hw), faster = fastermoe_ms(r, hw);
      const MPMoEChoice m = mpmoe_best(r, hw);
      sum_faster += faster / m.ms;
      sum_fast += fast / m.ms;
      ++rows;
      out.table.add_row({cluster, std::to_string(gpus), model, std::to_string(tokens), fmt(fast, 5), fmt(faster, 5),
                         fmt(m.ms, 5), std::to_string(m.parts), m.strategy, fmt(faster / m.ms, 4), fmt(fast / m.ms, 4),
                         fmt(paper_number("003.f10.pm_over_fastermoe"), 3), fmt(paper_number("003.f10.pm_over_fastmoe"), 3),
                         kAssumptions, kCalibration});
    }
  char line[256];
  std::snprintf(line, sizeof line,
                "mpmoe.f10 (modelled, %s): MPMoE-pm over FasterMoE %.2fx, over FastMoE %.2fx on average (paper, both "
                "clusters: %.2fx, %.2fx)",
                cluster.c_str(), sum_faster / rows, sum_fast / rows, paper_number("003.f10.pm_over_fastermoe"),
                paper_number("003.f10.pm_over_fastmoe"));
  out.summary.push_back(line);
  return out;
}

ProjectedTable project_mpmoe_f11(const HardwareProfile& adira) {
  // The memory saved over PMoE at the n the model picks on Adira: 003 Eq. 6's phi.
  ProjectedTable out{CsvTable({"model", "tokens_per_gpu", "n", "reduction_vs_pmoe", "paper_reduction_vs_pmoe",
                               "assumptions", "calibration"}),
                     {}};
  double lo = 1, hi = 0;
  for (const char* model : {"gpt-s", "gpt-xl", "bert-l"})
    for (int tokens : {2048, 4096, 8192, 16384, 32768}) {
      const MoELayerRun r = layer_run(model, 64, tokens);
      const int n = mpmoe_best(r, adira).parts;
      // One part shares nothing (Eq. 5 holds for n >= 2).
      const double phi =
          n < 2 ? 0.0 : mpmoe_memory_model({double(tokens), double(r.hidden), double(r.ffn), 64.0, 1.0, n}).saving_ratio;
      lo = std::min(lo, phi);
      hi = std::max(hi, phi);
      out.table.add_row({model, std::to_string(tokens), std::to_string(n), fmt(phi, 4), "0.23-0.38 (average per model)",
                         std::string(kAssumptions) + "; 003 Eq. 1-6 (hardware-independent)", kCalibration});
    }
  char line[200];
  std::snprintf(line, sizeof line, "mpmoe.f11 (modelled): memory %.0f-%.0f%% below PMoE at the modelled n (paper: 23-38%%)",
                100 * lo, 100 * hi);
  out.summary.push_back(line);
  return out;
}

ProjectedTable project_mpmoe_f14(const HardwareProfile& adira) {
  ProjectedTable out{CsvTable({"model", "gpus", "tokens_per_gpu", "best_n", "best_strategy", "ms", "paper_best_n",
                               "n_grows_with_b", "assumptions", "calibration"}),
                     {}};
  int last = 0;
  bool grows = true;
  for (int tokens : {2048, 4096, 8192, 16384, 24576, 32768}) {
    const MPMoEChoice m = mpmoe_best(layer_run("gpt-xl", 64, tokens), adira);
    grows = grows && m.parts >= last;
    last = m.parts;
    // 003 Sec. 5.5.2: n = 2 below 8k tokens, 4 up to 22k, 8 above.
    const char* paper = tokens < paper_number("003.f14.n2_below") ? "2" : tokens <= paper_number("003.f14.n4_below") ? "4" : "8";
    out.table.add_row({"gpt-xl", "64", std::to_string(tokens), std::to_string(m.parts), m.strategy, fmt(m.ms, 5), paper,
                       grows ? "yes" : "no", kAssumptions, kCalibration});
  }
  out.summary.push_back(std::string("mpmoe.f14 (modelled): the best n ") + (grows ? "grows" : "does not grow") +
                        " with B on GPT-XL (003 Sec. 5.5.2: 2 below 8k, 4 to 22k, 8 above)");
  return out;
}

ProjectedTable project_mpmoe_search(const HardwareProfile& adira) {
  ProjectedTable out{CsvTable({"model", "gpus", "strategy", "b_values", "b_step", "exhaustive_points", "algorithm1_points",
                               "exhaustive_over_algorithm1", "algorithm1_searches", "same_n_as_exhaustive",
                               "worst_ms_over_best", "parabola_like", "assumptions", "calibration"}),
                     {}};
  const int n_min = int(paper_number("003.s41.n_min")), n_max = int(paper_number("003.s41.n_max"));
  std::vector<int> bs;
  for (int b = kSearchBStep; b <= 32768; b += kSearchBStep) bs.push_back(b);
  // A training run meets the Bs in no order: a fixed shuffle (Fisher-Yates on mt19937, whose
  // output the standard fixes), so the table is the same on every machine.
  std::mt19937 rng(1);
  for (std::size_t i = bs.size() - 1; i > 0; --i) std::swap(bs[i], bs[rng() % (i + 1)]);
  int points = 0, exhaustive = 0;
  for (const char* strategy : {"S1", "S2", "S3", "S4"}) {
    auto ms = [&](int tokens, int n) { return mpmoe_layer_ms(layer_run("gpt-xl", 64, tokens), n, strategy, adira); };
    GranularitySearch search(n_min, n_max);
    int same = 0, parabolas = 0;
    double worst = 1;
    for (int b : bs) {
      const int picked = search.best(b, [&](int n) { return ms(b, n); });
      std::vector<double> curve;
      for (int n = n_min; n <= n_max; ++n) curve.push_back(ms(b, n));
      const auto bottom = std::min_element(curve.begin(), curve.end());
      same += picked == n_min + int(bottom - curve.begin());
      worst = std::max(worst, ms(b, picked) / *bottom);
      parabolas += GranularitySearch::parabola_like(curve);
    }
    const int all = int(bs.size()) * (n_max - n_min + 1), profiled = search.stats().profiled_points;
    points += profiled;
    exhaustive += all;
    out.table.add_row({"gpt-xl", "64", strategy, std::to_string(bs.size()), std::to_string(kSearchBStep),
                       std::to_string(all), std::to_string(profiled), fmt(double(all) / profiled, 4),
                       std::to_string(search.stats().searches), fmt(double(same) / bs.size(), 4), fmt(worst, 5),
                       fmt(double(parabolas) / bs.size(), 4),
                       std::string(kAssumptions) + "; Bs every " + std::to_string(kSearchBStep) +
                           " tokens per GPU to 32k, shuffled",
                       kCalibration});
  }
  char line[200];
  std::snprintf(line, sizeof line, "mpmoe.search (modelled): Algorithm 1 profiles %d points, an exhaustive search %d (%.0fx)",
                points, exhaustive, double(exhaustive) / points);
  out.summary.push_back(line);
  return out;
}

ProjectedTable project_mpmoe_f15(const HardwareProfile& adira) {
  ProjectedTable out{CsvTable({"gpus", "model", "tokens_per_gpu", "n", "strategy", "ms", "pmoe_ms", "overhead_vs_pmoe",
                               "best_strategy", "assumptions", "calibration"}),
                     {}};
  for (int gpus : {8, 16, 32, 64})
    for (int tokens : {4096, 8192}) {
      const MoELayerRun r = layer_run("gpt-xl", gpus, tokens);
      const MPMoEChoice best = mpmoe_best(r, adira);  // its strategy is the best one at its n
      const int n = best.parts;
      const double pmoe = mpmoe_layer_ms(r, n, "none", adira);
      for (const char* s : {"S1", "S2", "S3", "S4"}) {
        const double ms = mpmoe_layer_ms(r, n, s, adira);
        out.table.add_row({std::to_string(gpus), "gpt-xl", std::to_string(tokens), std::to_string(n), s, fmt(ms, 5),
                           fmt(pmoe, 5), fmt(ms / pmoe - 1, 4), best.strategy == s ? "yes" : "no", kAssumptions, kCalibration});
      }
    }
  out.summary.push_back("mpmoe.f15 (modelled): memory-reuse strategies' overhead over PMoE on Adira");
  return out;
}

ProjectedTable project_mpmoe_f17(const HardwareProfile& adira) {
  ProjectedTable out{CsvTable({"modelled_nodes", "gpus", "throughput_over_one_node", "percent_of_ideal", "paper_throughput_over_one_node",
                               "fastermoe_over_one_node", "paper_fastermoe_over_one_node", "assumptions", "calibration"}),
                     {}};
  const double paper = paper_number("003.f17.mpmoe_8nodes"), paper_faster = paper_number("003.f17.fastermoe_8nodes");
  double base = 0, base_faster = 0;
  for (int nodes : {1, 2, 4, 8}) {
    const int gpus = nodes * adira.gpus_per_node;
    double tput = 0, tput_faster = 0;  // tokens per ms over the cluster, summed over the models and B
    for (const char* model : {"gpt-s", "gpt-xl", "bert-l"})
      for (int tokens : {4096, 8192, 16384}) {
        const MoELayerRun r = layer_run(model, gpus, tokens);
        tput += double(tokens) * gpus / mpmoe_best(r, adira).ms;
        tput_faster += double(tokens) * gpus / fastermoe_ms(r, adira);
      }
    if (nodes == 1) base = tput, base_faster = tput_faster;
    const double s = tput / base, s_faster = tput_faster / base_faster;
    out.table.add_row({std::to_string(nodes), std::to_string(gpus), fmt(s, 4), fmt(100 * s / nodes, 3),
                       nodes == 8 ? fmt(paper, 3) : "n/a", fmt(s_faster, 4), nodes == 8 ? fmt(paper_faster, 3) : "n/a",
                       kAssumptions, kCalibration});
    if (nodes == 8) {
      char line[200];
      std::snprintf(line, sizeof line,
                    "mpmoe.f17 (modelled): 8 nodes give %.2fx one node's throughput, FasterMoE %.2fx (paper %.2fx and %.2fx)", s,
                    s_faster, paper, paper_faster);
      out.summary.push_back(line);
    }
  }
  return out;
}

}  // namespace moebench
