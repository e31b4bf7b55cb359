// This machine's runs held against the models: every comparison the local results allow
// (tools/local_comparison.h).
#include "tools/local_comparison.h"
#include "tools/local_results.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include "comm/collective_table.h"
#include "harness/provenance.h"
#include "models/collective_model.h"
#include "models/paper_specs.h"
#include "moe/dispatcher_table.h"
#include "tools/mpmoe_projection.h"

namespace moebench {

namespace {

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
      const std::optional<collectives::Collective> c = collectives::parse_collective(name);
      if (!c) throw Error(path + ": collective '" + name + "' is not a row of comm/collective_table.h's table");
      switch (*c) {
        case collectives::Collective::all_reduce: s = all_reduce_seconds(h, bytes, g); break;
        case collectives::Collective::all_to_all: s = all_to_all_seconds(h, bytes, g); break;
        case collectives::Collective::all_gather: s = all_gather_seconds(h, bytes, g); break;
        case collectives::Collective::reduce_scatter: s = reduce_scatter_seconds(h, bytes, g); break;
        case collectives::Collective::send_recv: s = send_recv_seconds(h, bytes, false); break;
      }
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
    const ModelShape m{.layers = layers, .hidden = hidden, .ffn = ffn, .heads = heads, .seq = seq, .vocab = vocab,
                       .experts = experts, .moe_every = 2};
    StepLayout l;
    l.kind = ppmoe ? LayoutKind::ppmoe : LayoutKind::dpmoe;
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
double moe_layer_ms(const HardwareProfile& hw, const DispatcherRow& dispatcher, int tokens, int hidden, int ffn, int experts,
                    int top_k, int ranks) {
  const double T = tokens, h = hidden, f = ffn, k = top_k;
  // The bench's groups: expert parallelism over every rank, PPMoE's TP group of every rank.
  const bool ep = dispatcher.experts_over == ExpertsOver::world, pp = dispatcher.experts_over == ExpertsOver::tp_group;
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
  for (const DispatcherRow& row : dispatcher_table()) {
    const std::string path = dir + "/layer_" + row.name + ".csv";
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
      if (!row.one_device() && (ranks < 1 || experts % ranks != 0)) continue;
      out.push_back({"moe.layer", dispatcher + " T=" + std::to_string(tokens) + " E=" + std::to_string(experts), link,
                     moe_layer_ms(with_link(hw, link), row, tokens, hidden, ffn, experts, k, ranks), ms});
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
    ModelShape m{.layers = layers, .hidden = hidden, .ffn = ffn, .heads = heads, .seq = seq, .vocab = vocab};
    StepLayout l;
    const std::optional<LayoutKind> k = parse_layout_name(kind);
    if (!k) throw Error(path + ": layout '" + kind + "' is not a row of models/layout.h's table");
    l.kind = *k;
    if (l.kind != LayoutKind::dense) {
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

// The optimizer's share of a step the model puts above the run: named with both figures where
// the run timed its optimizer (m6t.t1's optimizer_ms_per_step) and that term holds at least half
// of the miss. The profile's elementwise rate has every rank computing at once.
std::string optimizer_off(double modelled_ms, double measured_ms, double modelled_optimizer_ms,
                          std::optional<double> run_optimizer_ms) {
  if (modelled_ms <= measured_ms * (1 + kMissNamed) || !run_optimizer_ms) return "-";
  if (modelled_optimizer_ms - *run_optimizer_ms < 0.5 * (modelled_ms - measured_ms)) return "-";
  return "model above the run: its optimizer -- " + fmt(modelled_optimizer_ms, 4) + " ms modelled, " +
         fmt(*run_optimizer_ms, 4) + " ms in the run (the busiest rank's); the profile's elementwise rate is every rank's "
         "at once";
}

void compare_m6t(const HardwareProfile& hw, const std::string& path, std::vector<Comparison>& out,
                 NotCompared& missing) {
  if (!present(path, missing)) return;
  CsvIn<17> in(path);
  in.read_header(io::ignore_extra_column | io::ignore_missing_column, "layers", "routing", "prototypes", "top_k", "experts",
                 "hidden", "ffn", "heads", "seq", "tokens_per_rank", "gate", "ms_per_step", "ranks", "vocab", "link",
                 "expert_rows_max_over_mean", "optimizer_ms_per_step");
  if (!has_columns(in, {"layers", "routing", "prototypes", "top_k", "experts", "hidden", "ffn", "heads", "seq",
                        "tokens_per_rank", "gate", "ms_per_step", "ranks", "vocab", "link"},
                   path, missing))
    return;
  // "-": a run without the column (even routing; no optimizer timed)
  std::string routing, gate, link, expert_load = "-", optimizer_ms = "-";
  int layers, prototypes, k, experts, hidden, ffn, heads, seq, tokens, ranks, vocab;
  double ms;
  while (in.read_row(layers, routing, prototypes, k, experts, hidden, ffn, heads, seq, tokens, gate, ms, ranks, vocab, link,
                     expert_load, optimizer_ms)) {
    const ModelShape m{.layers = layers, .hidden = hidden, .ffn = ffn, .heads = heads, .seq = seq, .vocab = vocab,
                       .experts = experts, .moe_every = 1, .top_k = k, .prototypes = prototypes,
                       .capacity_factor = 1.25};  // m6t.t1's
    StepLayout l;
    l.paper_gate = gate.rfind("paper", 0) == 0;
    l.kind = LayoutKind::dpmoe;
    l.dp = ranks;
    l.micro_batch_sequences = std::max(1, tokens / seq);
    l.half = false;
    // The run's own routing (capacity 1.25 drops some assignments; the load is of kept rows).
    if (!read_expert_load(expert_load, path, l, missing)) continue;
    const HardwareProfile h = with_link(hw, link);
    if (validate_step(m, l, h)) continue;
    const StepPrediction p = predict_step(m, l, h);
    std::optional<double> run_optimizer;
    if (!read_measured_cell(optimizer_ms, "optimizer_ms_per_step", path, run_optimizer, missing)) continue;
    out.push_back({"m6t.t1", std::to_string(layers) + " layers " + routing + ", " + (l.paper_gate ? "paper" : "fused") + " gate",
                   link, p.step * 1e3, ms, optimizer_off(p.step * 1e3, ms, p.optimizer * 1e3, run_optimizer)});
  }
}

}  // namespace

ProjectedTable compare_local_runs(const HardwareProfile& hw, const std::string& dir) {
  std::vector<Comparison> rows;
  const bool profiled = std::filesystem::exists(hw.path);
  NotCompared missing{profiled ? provenance_of(hw.path, "device") : "", profiled ? provenance_of(hw.path, "scale") : "", {}};
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
