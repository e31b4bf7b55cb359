#include "tools/claims/between_runs.h"
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include "tools/claims/ledger.h"

namespace moebench {

std::string claim_class(const ClaimSpec& spec) {
  if (spec.quantity == "absolute") return "absolute";
  if (spec.unit == "x") return "timing ratio";
  if (spec.unit == "%" && (spec.judge.rfind("below:", 0) == 0 || spec.judge.rfind("above:", 0) == 0)) return "fit residual";
  if (spec.unit == "%" || spec.unit == "points") return "share";
  return "fraction";
}

std::optional<double> relative_move(const std::string& first, const std::string& second) {
  auto number = [](const std::string& s) -> std::optional<double> {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
    return v;
  };
  const auto a = number(first), b = number(second);
  if (!a || !b) return std::nullopt;
  const double scale = std::max(std::fabs(*a), std::fabs(*b));
  return scale == 0 ? 0.0 : std::fabs(*a - *b) / scale;
}

BetweenRuns between_runs(const CsvRows& stability, const std::vector<ClaimSpec>& specs) {
  std::map<std::string, std::vector<double>> moves;
  BetweenRuns out;
  for (std::size_t r = 0; r < stability.size(); ++r) {
    if (stability.cell(r, "same") == "-") continue;
    const std::string id = stability.cell(r, "claim");
    const auto spec = std::find_if(specs.begin(), specs.end(), [&](const ClaimSpec& s) { return s.id == id; });
    if (spec == specs.end()) continue;
    const auto move = relative_move(stability.cell(r, "first_value"), stability.cell(r, "second_value"));
    if (!move) continue;
    const std::string cls = claim_class(*spec);
    if (*move == 0)
      ++out.classes[cls].still, out.still.insert(id);
    else
      moves[cls].push_back(*move);
  }
  for (auto& [cls, m] : moves) {
    std::sort(m.begin(), m.end());
    ClassSpread& s = out.classes[cls];
    s.moved = int(m.size());
    s.median = m.size() % 2 ? m[m.size() / 2] : (m[m.size() / 2 - 1] + m[m.size() / 2]) / 2;
    s.p90 = m[std::size_t(std::ceil(0.9 * double(m.size()))) - 1];
  }
  return out;
}

double between_run_spread(const BetweenRuns& measured, const ClaimSpec& spec) {
  if (measured.still.count(spec.id)) return 0;
  const auto s = measured.classes.find(claim_class(spec));
  return s == measured.classes.end() ? 0 : s->second.p90;
}

}  // namespace moebench
