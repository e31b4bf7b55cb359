// ppmoe.eq: 000 Eq. 2 and Eq. 5 with this machine's profile beside the ratios its runs measured
// (tools/local_comparison.h).
#include <algorithm>
#include <filesystem>
#include "kernels/exec.h"
#include "models/collective_model.h"
#include "models/paper_specs.h"
#include "tools/local_comparison.h"
#include "tools/local_results.h"

namespace moebench {

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
  const bool profiled = std::filesystem::exists(hw.path);
  NotCompared skipped{profiled ? provenance_of(hw.path, "device") : "", profiled ? provenance_of(hw.path, "scale") : "", {}};
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
                     "seq", "vocab", "experts", "sequences_per_rank", "link", "ffn_gemms_ms", "ffn_allreduce_ms");
      if (!in.has_column("sequences_per_rank")) continue;
      if (!in.has_column("ffn_gemms_ms")) {
        skipped.push_back(path + " (no column 'ffn_gemms_ms': re-run it)");
        continue;
      }
      int dp, tp, layers, hidden, ffn, heads, seq, vocab, experts, sequences;
      std::string link;
      double ffn_ms, allreduce_ms;
      while (in.read_row(dp, tp, layers, hidden, ffn, heads, seq, vocab, experts, sequences, link, ffn_ms, allreduce_ms)) {
        const HardwareProfile h = with_link(hw, link);
        const ModelShape m{.layers = layers, .hidden = hidden, .ffn = ffn, .heads = heads, .seq = seq, .vocab = vocab,
                           .experts = experts, .moe_every = 2};
        StepLayout l;
        l.kind = LayoutKind::ppmoe;
        l.dp = dp; l.tp = tp; l.micro_batch_sequences = sequences; l.half = false;
        if (validate_step(m, l, h)) continue;
        const ForwardParts f = predict_step(m, l, h).forward;
        // ffn_gemms_ms: the FFNs' GEMMs alone (ffn_fwd_ms is the paper's FFN Fwd., all-reduce included)
        row("Eq. 5", "ppmoe.t3, " + link, tp, dp * tp, hidden, ppmoe_eq5_allreduce_over_calc(tp, h.peak_fp32_flops, h.intra_bw, hidden),
            f.ffn_allreduce / f.ffn, allreduce_ms / ffn_ms, "Eq. 5: (T - 1) T F / (4 B h), T = TP");
      }
    }
  } catch (const io::error::base& e) {
    throw Error(std::string("ppmoe.eq: reading the local results: ") + e.what());
  }
  out.summary.insert(out.summary.begin(), "ppmoe.eq: PPMoE Eq. 2 and Eq. 5 on this machine beside the measured ratios");
  for (const auto& m : skipped.lines) out.summary.push_back("  ppmoe.eq: not compared: " + m);
  return out;
}

}  // namespace moebench
