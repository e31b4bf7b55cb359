// MPMoE's time figures: the slowdown factors (f3), the fits (f9), the speedups (f10), the
// split's communication (f13), the granularity (f14), the breakdown (f16), scaling (f17), pm and layer.
#include "bench/mpmoe/figures.h"
#include "models/paper_values.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include "harness/spread.h"
#include "models/mpmoe_memory.h"

namespace moebench::mpmoe {

void Figures::write_f3() const {
  // alpha_min / alpha_max: the factor over the runs (fastest alone over slowest beside, and the
  // reverse), so a factor near 1 reads as within the runs' spread.
  CsvTable t({"model", "tokens", "y", "x", "alpha", "alpha_min", "alpha_max", "y_alone_ms", "y_beside_x_ms",
              "overlap_pays"});
  for (const CaseResult& c : cases) {
    if (!c.cal) continue;
    for (const auto& [yx, a] : c.cal->alpha.alpha) {
      const SlowdownTimes& m = c.cal->alpha_ms.at(yx);
      t.add_row({c.model, std::to_string(c.tokens), yx.first, yx.second, fmt(a, 4), fmt(m.alpha_min(), 4),
                 fmt(m.alpha_max(), 4), fmt(m.alone_ms), fmt(m.beside_ms), a > 0.5 ? "yes (alpha > 0.5)" : "no (alpha <= 0.5)"});
    }
  }
  t.write(dir + "f3.csv", ctx.provenance);
}

void Figures::write_f9() const {
  CsvTable t({"model", "tokens", "op", "volume", "volume_unit", "measured_ms", "fitted_ms", "speed", "speed_unit",
              "fit_max_relative_residual", "breakpoints"});
  for (const CaseResult& c : cases) {
    if (!c.cal) continue;
    const double M = c.cfg.hidden, H = c.cfg.ffn;
    for (const SpeedSample& s : c.cal->samples) {
      const bool rows = s.op.rfind("comp", 0) == 0;
      // GEMM FLOPs per row: forward 2 GEMMs, backward 4, the first GEMM alone 1.
      const double gemms = s.op == "comp_fwd" ? 2 : s.op == "comp_bwd" ? 4 : 1;
      const double speed = rows ? gemms * 2 * M * H * s.volume / (s.ms * 1e6) : s.volume / (s.ms * 1e6);
      const PiecewiseLinear& f = c.cal->fits.at(s.op);
      std::string knots;
      for (double k : f.breakpoints()) knots.append(knots.empty() ? "" : " ").append(fmt(k, 8));
      t.add_row({c.model, std::to_string(c.tokens), s.op, fmt(s.volume, 12), rows ? "rows" : "bytes", fmt(s.ms),
                 fmt(c.cal->time(s.op, s.volume)), fmt(speed, 5), rows ? "GFLOP/s" : "GB/s",
                 fmt(f.max_relative_residual(), 4), knots.empty() ? "none" : knots});
    }
  }
  t.write(dir + "f9.csv", ctx.provenance);
}

void Figures::write_f10() const {
  std::vector<std::string> cols = {"model", "tokens", "label"};
  for (const char* w : {"fastmoe", "fastermoe", "pb", "pm"})
    for (const char* k : {"_ms", "_ms_min", "_ms_max", "_ms_reps"}) cols.push_back(std::string(w) + k);
  append(cols, {"pb_n", "pb_strategy", "pb_search_ms", "pb_profiled_points", "pb_search", "pm_n", "pm_strategy",
                "pm_calibration_ms", "pb_over_fastermoe", "pm_over_fastermoe", "pb_over_fastmoe", "pm_over_fastmoe",
                "paper_pb_over_fastermoe", "paper_pm_over_fastermoe", "paper_pb_over_fastmoe", "paper_pm_over_fastmoe",
                "pb_over_fastermoe_over_paper", "pb_over_fastmoe_over_paper", "pm_time_over_pb", "pm_target", "pm_status",
                "repetitions"});
  const double paper_pb_faster = paper_number("003.f10.pb_over_fastermoe"), paper_pm_faster = paper_number("003.f10.pm_over_fastermoe"),
               paper_pb_fast = paper_number("003.f10.pb_over_fastmoe"), paper_pm_fast = paper_number("003.f10.pm_over_fastmoe");
  CsvTable t(cols);
  for (const CaseResult& c : cases) {
    const RunResult *fast = find(c, tokens_split(1)), *faster = find(c, groups_split(1)), *pb = find(c, c.pb);
    if (!fast || !faster || !pb || !c.pm) continue;
    const RunResult* pm = find(c, tokens_split(c.pm->n, c.pm->reuse));
    std::vector<std::string> row = {c.model, std::to_string(c.tokens), c.model + "(" + std::to_string(c.tokens) + ")"};
    for (const RunResult* r : {fast, faster, pb, pm}) append(row, timing(*r)), row.push_back(reps_cell(*r));
    // Ratios of the paired rounds: the median of each round's.
    const double q = paired_ratio(*pm, *pb), pb_faster = paired_ratio(*faster, *pb), pb_fast = paired_ratio(*fast, *pb);
    append(row, {std::to_string(c.pb.partitions), reuse_name(c.pb.reuse), fmt(c.pb_search_ms), std::to_string(c.pb_points),
                 c.pb_saved ? "saved search reused" : "searched", std::to_string(c.pm->n), reuse_name(c.pm->reuse),
                 fmt(c.cal->calibration_ms), fmt(pb_faster, 4), fmt(paired_ratio(*faster, *pm), 4), fmt(pb_fast, 4),
                 fmt(paired_ratio(*fast, *pm), 4), fmt(paper_pb_faster, 3), fmt(paper_pm_faster, 3), fmt(paper_pb_fast, 3),
                 fmt(paper_pm_fast, 3), fmt(pb_faster / paper_pb_faster, 4), fmt(pb_fast / paper_pb_fast, 4), fmt(q, 4),
                 fmt(kPmTarget), q <= kPmTarget ? "met" : "NOT met", std::to_string(pb->ms.size())});
    t.add_row(row);
    std::printf("f10 %-6s B=%-6d FastMoE %8.1f  FasterMoE %8.1f  pb (n=%d %s) %8.1f  pm (n=%d %s) %8.1f ms;  pb over FasterMoE "
                "%.2fx (paper %.2fx), over FastMoE %.2fx (paper %.2fx); pm / pb %.3f (our target <= %.2f: %s)\n",
                c.model.c_str(), c.tokens, fast->median_ms(), faster->median_ms(), c.pb.partitions, reuse_name(c.pb.reuse),
                pb->median_ms(), c.pm->n, reuse_name(c.pm->reuse), pm->median_ms(), pb_faster, paper_pb_faster, pb_fast,
                paper_pb_fast, q, kPmTarget,
                q <= kPmTarget ? "met" : "NOT met");
  }
  t.write(dir + "f10.csv", ctx.provenance);
}

void Figures::write_f13() const {
  // The sum per iteration (paired rounds: iteration r of every row ran in round r), its median and
  // range; dispatch and recovery apart are means over the iterations.
  CsvTable t({"model", "tokens", "layer", "granularity", "dispatch_recovery_ms", "dispatch_recovery_ms_min",
              "dispatch_recovery_ms_max", "dispatch_recovery_ms_reps", "repetitions", "dispatch_ms", "recovery_ms"});
  for (const CaseResult& c : cases) {
    auto add = [&](const std::string& label, const std::string& g, const RunResult* r) {
      if (!r) return;
      const double d = r->range_ms.count("moe.a2a.dispatch") ? r->range_ms.at("moe.a2a.dispatch") : 0;
      const double rc = r->range_ms.count("moe.a2a.combine") ? r->range_ms.at("moe.a2a.combine") : 0;
      const std::vector<double> each = r->ranges_each_ms({"moe.a2a.dispatch", "moe.a2a.combine"});
      const Spread sum = spread_of(each.empty() ? std::vector<double>{d + rc} : each);
      t.add_row({c.model, std::to_string(c.tokens), label, g, fmt(sum.median), fmt(sum.min), fmt(sum.max), repetitions_cell(each),
                 std::to_string(each.size()), fmt(d), fmt(rc)});
    };
    const int W = ctx.world.size();
    for (int g = 1; g <= W; ++g)
      if (W % g == 0) add("FasterMoE-style", "g=" + std::to_string(g), find(c, groups_split(g), true));
    for (int n : {1, 2, 4, 8}) add("MPMoE", "n=" + std::to_string(n), find(c, tokens_split(n), true));
  }
  t.write(dir + "f13.csv", ctx.provenance);
}

void Figures::write_f14() const {
  CsvTable t({"model", "tokens", "n", "ms", "ms_min", "ms_max", "algorithm1_pick", "best_measured_n",
              "best_measured_n_min", "best_measured_n_max", "paper_gpt_xl_pick"});
  for (const CaseResult& c : cases) {
    std::vector<int> ns;
    std::vector<Spread> times;
    for (int n = 1; n <= 8; ++n)
      if (const RunResult* r = find(c, tokens_split(n))) {
        ns.push_back(n);
        times.push_back(spread_of(r->ms));
      }
    if (ns.empty()) continue;
    // The best n, and the range of those the runs' spread alone could have made the best.
    const Fastest fastest = fastest_of(times);
    const int best = ns[fastest.best], best_min = ns[fastest.first], best_max = ns[fastest.last];
    const double best_ms = times[fastest.best].median;
    // 003 Sec. 5.5.2 (GPT-XL on Adira): n = 2 below 8k tokens, 4 up to 22k, 8 above.
    const double below2 = paper_number("003.f14.n2_below"), below4 = paper_number("003.f14.n4_below");
    const std::string paper = c.tokens < below2 ? "2 (B < " + fmt(below2) + ")"
                              : c.tokens <= below4 ? "4 (" + fmt(below2) + "-" + fmt(below4) + ")"
                                                   : "8 (B > " + fmt(below4) + ")";
    for (int n = 1; n <= 8; ++n)
      if (const RunResult* r = find(c, tokens_split(n))) {
        std::vector<std::string> row = {c.model, std::to_string(c.tokens), std::to_string(n)};
        append(row, timing(*r));
        append(row, {std::to_string(c.f14_pick), std::to_string(best), std::to_string(best_min),
                     std::to_string(best_max), paper});
        t.add_row(row);
      }
    std::printf("f14 %-6s B=%-6d PMoE best n = %d (%.1f ms; the runs' spread allows %d-%d); Algorithm 1 picks n = %d "
                "(paper, GPT-XL: %s)\n",
                c.model.c_str(), c.tokens, best, best_ms, best_min, best_max, c.f14_pick, paper.c_str());
  }
  t.write(dir + "f14.csv", ctx.provenance);
}

void Figures::write_f16() const {
  CsvTable t({"model", "tokens", "way", "comm_ms", "comp_ms", "mem_ms", "other_ms", "total_ms", "total_ms_min",
              "total_ms_max", "total_ms_reps", "repetitions", "ideal_ms", "ideal_over_pipelined", "ideal_over_pipelined_min",
              "ideal_over_pipelined_max", "target", "target_status", "paper", "paper_status", "note"});
  // 003 Sec. 5.6: MPMoE reaches 70% of max(comm, comp) of seq(n); tensor cores and seq(n=6) as it states them.
  const double paper_ideal = paper_number("003.f16.of_ideal") / 100;
  const std::string tensor_core_paper = "paper: tensor cores -" + fmt(paper_number("003.f16.tc_e2e_bert")) + "% (BERT-L), -" +
                                        fmt(paper_number("003.f16.tc_e2e_gptxl")) + "% (GPT-XL) end to end";
  const std::string seq6_paper = "paper: +" + fmt(paper_number("003.f16.seq6_overhead_bert")) + "% (BERT-L), +" +
                                 fmt(paper_number("003.f16.seq6_overhead_gptxl")) + "% (GPT-XL) over seq(n=1)";
  auto comm = [](const RunResult& r) { return r.comm_union_ms; };
  auto other = [](const RunResult& r) { return r.other_ms; };
  for (const CaseResult& c : cases) {
    const int six = std::min(6, c.tokens);
    const RunResult *seq1 = find(c, tokens_split(1), true), *seq6 = find(c, tokens_split(six), true);
    if (!seq1 || !seq6 || !c.pm) continue;
    if (!c.no_tensor_cores)
      t.add_row({c.model, std::to_string(c.tokens), "no TensorCore", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a",
                 "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a",
                 "not measured: the cpu backend has no tensor cores to turn off; " + tensor_core_paper});
    // A pipelined run against its own seq(n): the ideal is max(comm, comp) of the parts run one
    // after another; the work the pipeline does not touch (gating, local permutations) is
    // taken out of both, as the paper leaves it out.
    auto add = [&](const std::string& way, const RunResult& r, const RunResult* seq, const std::string& note = "") {
      std::vector<std::string> row = {c.model, std::to_string(c.tokens), way, fmt(comm(r)), fmt(r.busy_ms("C")),
                                      fmt(r.busy_ms("M")), fmt(other(r))};
      append(row, timing(r));
      append(row, {reps_cell(r), std::to_string(r.ms.size())});
      if (!seq) {
        append(row, {"n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", note.empty() ? "n/a" : note});
        t.add_row(row);
        return;
      }
      // The ratio's range is the pipelined run's: its slowest and its fastest iteration.
      const double ideal = std::max(comm(*seq), seq->busy_ms("C"));
      auto of_ideal = [&](double pipelined_ms) { return ideal / std::max(pipelined_ms - other(*seq), 1e-9); };
      const double ratio = of_ideal(r.median_ms());
      append(row, {fmt(ideal), fmt(ratio, 4), fmt(of_ideal(max_of(r)), 4), fmt(of_ideal(min_of(r)), 4),
                   fmt(kIdealTarget), ratio >= kIdealTarget ? "met" : "NOT met", fmt(paper_ideal, 3),
                   ratio >= paper_ideal ? "at least the paper's" : "below the paper's", "ideal: max(comm, comp) of seq(n)"});
      t.add_row(row);
      std::printf("f16 %-6s B=%-6d %s: max(comm %.1f, comp %.1f) of seq(n) / (pipelined %.1f - other %.1f) = %.3f "
                  "(paper %.2f; our target >= %.2f: %s)\n",
                  c.model.c_str(), c.tokens, way.c_str(), comm(*seq), seq->busy_ms("C"), r.median_ms(), other(*seq), ratio,
                  paper_ideal, kIdealTarget, ratio >= kIdealTarget ? "met" : "NOT met");
    };
    if (c.no_tensor_cores) {
      add("no TensorCore", *c.no_tensor_cores, nullptr, tensor_core_paper);
      std::printf("f16 %-6s B=%-6d seq(n=1) with tensor cores / without: %.3f (%s)\n", c.model.c_str(), c.tokens,
                  seq1->median_ms() / c.no_tensor_cores->median_ms(), tensor_core_paper.c_str());
    }
    add("seq(n=1)", *seq1, nullptr);
    add("seq(n=" + std::to_string(six) + ")", *seq6, nullptr, six == 6 ? seq6_paper : "");
    const PipelineConfig pm = tokens_split(c.pm->n, c.pm->reuse);
    if (const RunResult* r = find(c, c.pb)) add("MPMoE-pb " + c.pb.describe(), *r, find(c, c.pb, true));
    if (const RunResult* r = find(c, pm)) add("MPMoE-pm " + pm.describe(), *r, find(c, pm, true));
  }
  t.write(dir + "f16.csv", ctx.provenance);
}

void Figures::write_f17() const {
  // The run's node count is its provenance's (nodes, hosts).
  CsvTable t({"status"});
  const int nodes = ctx.rt.nodes();
  t.add_row({nodes > 1 ? "measured by experiments/mpmoe/f17.sh as throughput per node count: see f10.csv of each run"
                                : "not measured here: all " + std::to_string(ctx.world.size()) +
                                      " ranks share one host, and multi-node scaling needs ranks on several nodes "
                                      "(experiments/mpmoe/f17.sh on a cluster)"});
  t.write(dir + "f17.csv", ctx.provenance);
}

// S and R run on two streams over one wire (one NIC, or the shared emulated link): a range
// of one includes time waiting for the other's bytes, so their busy times are shown apart
// but held against the model together, as the time some comm was in flight.
void Figures::write_pm() const {
  std::vector<std::string> cols = {"model", "tokens", "n", "strategy", "chosen_by", "S_predicted_ms", "S_measured_ms",
                                   "R_predicted_ms", "R_measured_ms"};
  for (const char* k : {"comm", "C", "M", "total"})
    for (const char* w : {"_predicted_ms", "_measured_ms", "_error"}) cols.push_back(std::string(k) + w);
  append(cols, {"goal_error", "status"});
  CsvTable t(cols);
  double worst = 0;
  for (const CaseResult& c : cases) {
    if (!c.cal) continue;
    for (const auto& [key, r] : c.runs) {
      const PipelineConfig& p = c.configs.at(key);
      if (key.rfind("seq ", 0) == 0 || p.split != PipelineSplit::tokens) continue;
      const ModelPrediction m = predict(*c.cal, c.cfg, c.tokens, p.partitions, p.reuse);
      std::string chosen = c.pb.partitions == p.partitions && c.pb.reuse == p.reuse ? "pb" : "";
      if (c.pm && c.pm->n == p.partitions && c.pm->reuse == p.reuse) chosen += chosen.empty() ? "pm" : "+pm";
      std::vector<std::string> row = {c.model, std::to_string(c.tokens), std::to_string(p.partitions), reuse_name(p.reuse),
                                      chosen, fmt(m.busy_ms("S")), fmt(r.busy_ms("S")), fmt(m.busy_ms("R")),
                                      fmt(r.busy_ms("R"))};
      double case_worst = 0;
      const std::pair<double, double> kinds[3] = {{m.busy_ms("S") + m.busy_ms("R"), r.comm_union_ms},
                                                  {m.busy_ms("C"), r.busy_ms("C")},
                                                  {m.busy_ms("M"), r.busy_ms("M")}};
      for (const auto& [pred, meas] : kinds) {
        const double err = meas > 0 ? (pred - meas) / meas : 0;
        if (meas > 0) case_worst = std::max(case_worst, std::fabs(err));
        append(row, {fmt(pred), fmt(meas), meas > 0 ? fmt(err, 4) : "n/a"});
      }
      const double err = (m.total_ms - r.median_ms()) / r.median_ms();
      case_worst = std::max(case_worst, std::fabs(err));
      append(row, {fmt(m.total_ms), fmt(r.median_ms()), fmt(err, 4), fmt(kPhaseErrorGoal),
                   case_worst <= kPhaseErrorGoal ? "within goal" : "outside goal"});
      worst = std::max(worst, case_worst);
      t.add_row(row);
    }
  }
  if (t.rows())
    std::printf("pm  largest prediction error (comm, C, M, total) %.1f%% over %zu configurations (goal: within %.0f%%)\n",
                100 * worst, t.rows(), 100 * kPhaseErrorGoal);
  t.write(dir + "pm.csv", ctx.provenance);
}

void Figures::write_layer() const {
  CsvTable t({"model", "tokens", "layer", "ms", "ms_min", "ms_max", "S_ms", "C_ms", "R_ms", "M_ms", "peak_model_states_bytes",
              "peak_activations_bytes", "peak_buffers_bytes", "peak_temporary_bytes", "pinned_host_peak_bytes"});
  for (const CaseResult& c : cases)
    if (const RunResult* r = find(c, pipe)) {
      std::vector<std::string> row = {c.model, std::to_string(c.tokens), pipe.describe()};
      append(row, timing(*r));
      for (const char* k : {"S", "C", "R", "M"}) row.push_back(fmt(r->busy_ms(k)));
      for (int tag = 0; tag < kMemTagCount; ++tag) row.push_back(fmt(r->peak[tag], 15));
      row.push_back(fmt(r->pinned_peak, 15));
      t.add_row(row);
      std::printf("layer %-6s B=%-6d %-22s %9.2f ms [%.2f .. %.2f]  peak %s\n", c.model.c_str(), c.tokens,
                  pipe.describe().c_str(), r->median_ms(), min_of(*r), max_of(*r), format_bytes(r->peak_total).c_str());
    }
  t.write(dir + "layer.csv", ctx.provenance);
}

}  // namespace moebench::mpmoe
