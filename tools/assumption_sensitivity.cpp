#include "tools/assumption_sensitivity.h"
#include <algorithm>
#include <cmath>
#include <filesystem>
#include "kernels/exec.h"
#include "models/csv_rows.h"

namespace moebench {
namespace {

const ProfileScalar* scalar_input(const std::string& field) {
  for (const ProfileScalar& s : profile_scalars())
    if (field == s.field) return &s;
  return nullptr;
}
const char* const kScales[] = {"gemm_efficiency", "overlap_slowdown"};

std::string allowed_inputs() {
  std::string s = "gpus_per_node (count)";
  for (const ProfileScalar& k : profile_scalars()) s += std::string(", ") + k.field + " (" + k.unit + ")";
  for (const char* k : kScales) s += std::string(", ") + k + " (x)";
  return s;
}

// The unit an input must be given in.
std::string unit_of(const std::string& input) {
  if (input == "gpus_per_node") return "count";
  if (const ProfileScalar* s = scalar_input(input)) return s->unit;
  for (const char* k : kScales)
    if (input == k) return "x";
  return "";
}

std::string value_text(double v) { return fmt(v, 4); }

struct Outcome {
  std::optional<Number> value;
  std::string verdict;
};

// Every claim's modelled value and verdict on `profiles`' projections.
std::vector<Outcome> judge_projected(const PaperProfiles& profiles, const std::vector<ClaimSpec>& claims,
                                     const std::vector<double>& papers, const std::string& scratch) {
  write_projections(project_papers(profiles), scratch + "/models", false);
  ResultFiles files(scratch);
  std::vector<Outcome> out;
  for (std::size_t i = 0; i < claims.size(); ++i) {
    const Evaluation e = evaluate(claims[i].model, files);
    Outcome o{e.value, ""};
    if (e.value) o.verdict = judge_number(claims[i], papers[i], *e.value).verdict;
    out.push_back(o);
  }
  return out;
}

}  // namespace

std::string default_assumed_inputs_path() { return std::string(MOEBENCH_SOURCE_DIR) + "/models/assumption_ranges.csv"; }

std::vector<AssumedInput> read_assumed_inputs(const std::string& path) {
  const CsvRows t = CsvRows::read(path);
  for (const char* c : {"profile", "input", "low", "high", "unit", "why"})
    if (!t.has(c)) throw Error(path + ": no column '" + c + "'; columns: profile,input,low,high,unit,why");
  std::vector<AssumedInput> v;
  PaperProfiles keys;
  for (std::size_t r = 0; r < t.size(); ++r) {
    AssumedInput in{t.cell(r, "profile"), t.cell(r, "input"), t.cell(r, "unit"), t.cell(r, "why")};
    const std::string where = path + ": row " + std::to_string(r + 2) + " (" + in.profile + " " + in.input + ")";
    keys.by_key(in.profile);  // throws naming the keys there are
    const std::string unit = unit_of(in.input);
    if (unit.empty()) throw Error(where + ": input '" + in.input + "'; allowed: " + allowed_inputs());
    if (in.unit != unit) throw Error(where + ": unit '" + in.unit + "'; allowed: " + unit);
    char* end = nullptr;
    in.low = std::strtod(t.cell(r, "low").c_str(), &end);
    const bool low_ok = *end == '\0' && !t.cell(r, "low").empty();
    in.high = std::strtod(t.cell(r, "high").c_str(), &end);
    if (!low_ok || *end != '\0' || t.cell(r, "high").empty() || !(in.low > 0) || !(in.high > in.low))
      throw Error(where + ": low and high must be numbers with 0 < low < high, got '" + t.cell(r, "low") + "', '" +
                  t.cell(r, "high") + "'");
    if (in.why.empty()) throw Error(where + ": the range gives no why");
    for (const AssumedInput& o : v)
      if (o.profile == in.profile && o.input == in.input) throw Error(where + ": given twice");
    v.push_back(in);
  }
  return v;
}

double input_value(const HardwareProfile& hw, const AssumedInput& in) {
  if (in.input == "gpus_per_node") return hw.gpus_per_node;
  if (const ProfileScalar* s = scalar_input(in.input)) return hw.*(s->member) / s->scale;
  return 1;
}

HardwareProfile with_input(HardwareProfile hw, const AssumedInput& in, double value) {
  if (in.input == "gpus_per_node") {
    if (value != std::floor(value)) throw Error(in.profile + " gpus_per_node: a whole number, got " + value_text(value));
    hw.gpus_per_node = int(value);
  } else if (const ProfileScalar* s = scalar_input(in.input)) {
    hw.*(s->member) = value * s->scale;
  } else if (in.input == "gemm_efficiency") {
    for (auto& [flops, eff] : hw.gemm_efficiency) eff = std::min(1.0, eff * value);
  } else if (in.input == "overlap_slowdown") {
    if (hw.overlap_slowdown.empty())
      throw Error(in.profile + " overlap_slowdown: the profile gives no slowdown factors to scale");
    for (auto& [pair, alpha] : hw.overlap_slowdown) alpha = std::min(1.0, alpha * value);
  } else {
    throw Error("input '" + in.input + "'; allowed: " + allowed_inputs());
  }
  return hw;
}

ProjectedTable assumption_sensitivity(const PaperProfiles& base, const std::vector<AssumedInput>& inputs,
                                      const std::vector<ClaimSpec>& all_claims, const std::string& scratch) {
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{scratch};
  std::vector<ClaimSpec> claims;
  std::vector<double> papers;
  for (const ClaimSpec& c : all_claims)
    if (!c.model.empty() && c.judge != "none") claims.push_back(c), papers.push_back(claim_paper_value(c));
  const std::vector<Outcome> at_base = judge_projected(base, claims, papers, scratch);

  struct Row {
    std::size_t claim, input;
    Outcome low, high;
    double swing;
    bool changes;
  };
  std::vector<Row> rows;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const AssumedInput& in = inputs[k];
    PaperProfiles low = base, high = base;
    low.by_key(in.profile) = with_input(base.by_key(in.profile), in, in.low);
    high.by_key(in.profile) = with_input(base.by_key(in.profile), in, in.high);
    const std::vector<Outcome> lo = judge_projected(low, claims, papers, scratch);
    const std::vector<Outcome> hi = judge_projected(high, claims, papers, scratch);
    for (std::size_t i = 0; i < claims.size(); ++i) {
      if (!at_base[i].value || !lo[i].value || !hi[i].value) continue;
      const double b = at_base[i].value->v, l = lo[i].value->v, h = hi[i].value->v;
      const double swing = (std::max({b, l, h}) - std::min({b, l, h})) / std::max(std::fabs(b), 1e-12);
      const bool changes = lo[i].verdict != at_base[i].verdict || hi[i].verdict != at_base[i].verdict;
      if (swing > 1e-3 || changes) rows.push_back({i, k, lo[i], hi[i], swing, changes});
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.claim != b.claim ? a.claim < b.claim : a.swing > b.swing;
  });

  ProjectedTable out{CsvTable({"claim", "profile", "input", "unit", "input_low", "input_base", "input_high", "claim_at_low",
                               "claim_at_base", "claim_at_high", "paper", "verdict_at_low", "verdict_at_base",
                               "verdict_at_high", "swing", "verdict_changes", "input_source", "range_why"}),
                     {}};
  int changed = 0;
  std::string last;
  for (const Row& r : rows) {
    const ClaimSpec& c = claims[r.claim];
    const AssumedInput& in = inputs[r.input];
    const HardwareProfile& hw = base.by_key(in.profile);
    const auto src = hw.sources.find(in.input);
    out.table.add_row({c.id, in.profile, in.input, in.unit, value_text(in.low),
                       value_text(input_value(hw, in)), value_text(in.high), value_text(r.low.value->v),
                       value_text(at_base[r.claim].value->v), value_text(r.high.value->v), value_text(papers[r.claim]),
                       r.low.verdict, at_base[r.claim].verdict, r.high.verdict, value_text(r.swing), r.changes ? "yes" : "no",
                       src == hw.sources.end() ? "-" : src->second, in.why});
    if (r.changes && c.id != last) ++changed, last = c.id;
  }
  out.summary.push_back("models.sensitivity: " + std::to_string(inputs.size()) + " assumed inputs across their ranges; " +
                        std::to_string(changed) + " of " + std::to_string(claims.size()) +
                        " modelled claims change verdict within a range");
  return out;
}

}  // namespace moebench
