#include "tools/claims/node_setting.h"
#include <fstream>
#include <sstream>
#include "harness/csv.h"
#include "tools/claims/expression.h"

namespace moebench {

namespace {

std::optional<CsvRows> setting_rows(const std::string& results) {
  const std::string path = results + "/" + kNodesFolder + "setting.csv";
  if (!std::ifstream(path)) return std::nullopt;
  return CsvRows::read(path);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

std::string markdown(std::string s) { return replace_all(s, "|", "\\|"); }

}  // namespace

std::optional<std::string> nodes_not_measured(const std::string& results) {
  const std::optional<CsvRows> t = setting_rows(results);
  if (!t || t->size() == 0)
    return std::string("not measured here: no run over two nodes in this results folder (experiments/nodes/run.sh "
                       "writes nodes/setting.csv)");
  const std::string status = t->cell(0, "status");
  if (status == "measured") return std::nullopt;
  return status;
}

bool several_nodes(const std::string& nodes_cell) {
  char* end = nullptr;
  const long n = std::strtol(nodes_cell.c_str(), &end, 10);
  return end != nodes_cell.c_str() && *end == '\0' && n >= 2;
}

std::vector<RateSensitivity> rate_sensitivity(const std::vector<ClaimSpec>& specs, const std::string& results) {
  const std::optional<CsvRows> t = setting_rows(results);
  std::vector<RateSensitivity> out;
  if (!t || t->size() == 0 || t->cell(0, "status") != "measured") return out;
  const std::string rates[3] = {t->cell(0, "half_rate_GBps"), t->cell(0, "rate_GBps"), t->cell(0, "twice_rate_GBps")};
  const std::string folders[3] = {"nodes_half/", kNodesFolder, "nodes_twice/"};
  std::vector<ClaimSpec> picked;
  for (const ClaimSpec& s : specs)
    if (s.judge != "none" && s.local.find(kNodesFolder) != std::string::npos) picked.push_back(s);
  std::vector<std::vector<ClaimResult>> judged;
  for (const std::string& folder : folders) {
    std::vector<ClaimSpec> at = picked;
    for (ClaimSpec& s : at) s.local = replace_all(s.local, kNodesFolder, folder), s.gpu.clear(), s.model.clear();
    judged.push_back(judge_claims(at, results));
  }
  for (std::size_t i = 0; i < picked.size(); ++i) {
    RateSensitivity r;
    r.claim = picked[i].id;
    bool any_other_rate = false;
    for (int k = 0; k < 3; ++k) {
      const SettingResult& s = judged[std::size_t(k)][i].local;
      r.rate[k] = rates[k];
      r.value[k] = s.value ? fmt(s.value->v, 3) : "";
      r.verdict[k] = s.value ? s.verdict : "";
      any_other_rate |= k != 1 && s.value;
    }
    if (any_other_rate) out.push_back(r);
  }
  return out;
}

std::string node_setting_section(const std::vector<ClaimSpec>& specs, const std::string& results) {
  std::ostringstream md;
  md << "## The two-level network\n\nThe claims that rest on the split between a node's fast links and the slower "
        "network between nodes are judged from runs over two nodes on this machine (`experiments/nodes/run.sh`: network, "
        "UTS and mount namespaces under a real Slurm; shared memory between the ranks of a node, TCP shaped between "
        "the nodes), never from one host's flat network. ";
  const std::optional<CsvRows> t = setting_rows(results);
  if (const std::optional<std::string> why = nodes_not_measured(results)) {
    md << "Here that setting was " << *why << "; those claims say so.\n\n";
    return md.str();
  }
  md << "The link's rate: " << t->cell(0, "rate_GBps") << " GB/s, " << t->cell(0, "rate_rule") << " ("
     << t->cell(0, "gemm_flops_per_rank") << " FLOP/s over " << t->cell(0, "flop_per_byte") << " FLOP per byte). "
     << "Neither this setting nor the emulated link models GPU kernels, RDMA or NCCL's algorithms, and shared memory "
        "between CPU ranks stands for NVLink (docs/architecture.md).\n\n";
  const std::vector<RateSensitivity> rows = rate_sensitivity(specs, results);
  if (rows.empty()) return md.str();
  md << "Its sensitivity: the same runs at half and at twice the rate.\n\n| claim | at " << rows[0].rate[0] << " GB/s | at "
     << rows[0].rate[1] << " GB/s | at " << rows[0].rate[2] << " GB/s |\n|---|---|---|---|\n";
  for (const RateSensitivity& r : rows) {
    md << "| " << markdown(r.claim) << " |";
    for (int k = 0; k < 3; ++k)
      md << " " << (r.value[k].empty() ? std::string("-") : r.value[k] + ", " + markdown(r.verdict[k])) << " |";
    md << "\n";
  }
  md << "\n";
  return md.str();
}

}  // namespace moebench
