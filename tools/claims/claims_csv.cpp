// results/claims.csv: one row per claim, each setting's number, range and verdict beside the
// paper's, and the verdict with its reasons.
#include "harness/csv.h"
#include "tools/claims/ledger.h"

namespace moebench {

std::string claims_csv(const std::vector<ClaimResult>& claims) {
  CsvTable t({"claim", "paper", "where", "text", "paper_value", "unit", "judge", "local_value", "local_low", "local_high",
              "local_over_paper", "local_verdict", "local_csv", "local_provenance", "gpu_value", "gpu_low", "gpu_high",
              "gpu_over_paper",
              "gpu_verdict", "gpu_csv", "gpu_provenance", "model_value", "model_over_paper", "model_verdict", "model_csv",
              "model_assumptions", "verdict", "why", "cluster_command"});
  for (const ClaimResult& c : claims) {
    auto value = [](const SettingResult& s) { return s.value ? fmt(s.value->v, 4) : std::string("-"); };
    auto ratio = [&](const SettingResult& s) {
      return s.value && c.paper != 0 ? fmt(s.value->v / c.paper, 4) : std::string("-");
    };
    auto or_dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
    const bool judged = c.spec.judge != "none";
    t.add_row({c.spec.id, c.spec.paper, c.spec.where, c.spec.text, judged ? fmt(c.paper, 4) : "-", or_dash(c.spec.unit),
               c.spec.judge, value(c.local), c.local.value ? fmt(c.local.value->lo, 4) : "-",
               c.local.value ? fmt(c.local.value->hi, 4) : "-", ratio(c.local), or_dash(c.local.verdict),
               or_dash(c.local.files), or_dash(c.local.value ? c.local.provenance : ""), value(c.gpu),
               c.gpu.value ? fmt(c.gpu.value->lo, 4) : "-", c.gpu.value ? fmt(c.gpu.value->hi, 4) : "-", ratio(c.gpu),
               or_dash(c.gpu.verdict), or_dash(c.gpu.value ? c.gpu.files : ""), or_dash(c.gpu.value ? c.gpu.provenance : ""),
               value(c.model), ratio(c.model), or_dash(c.model.verdict), or_dash(c.model.value ? c.model.files : ""),
               or_dash(c.model_assumptions), c.verdict, c.why, or_dash(c.spec.cluster_command)});
  }
  return t.to_string(nullptr);
}

}  // namespace moebench
