#include "tools/claims/stability.h"
#include <algorithm>
#include <map>
#include <sstream>
#include "harness/csv.h"
#include "kernels/exec.h"
#include "tools/claims/between_runs.h"

namespace moebench {

bool is_run_verdict(const std::string& v) {
  return v == "reproduced" || v == "partly" || v == "unsettled" || v == "contradicted" || v == "not reproduced" ||
         v == "noise";
}

std::vector<const VerdictPair*> Agreement::flipped() const {
  std::vector<const VerdictPair*> out;
  for (const VerdictPair& p : pairs)
    if (p.counted && p.first != p.second) out.push_back(&p);
  return out;
}

std::optional<double> median_relative_difference(const std::vector<VerdictPair>& pairs) {
  std::vector<double> d;
  for (const VerdictPair& p : pairs)
    if (const auto move = relative_move(p.first_value, p.second_value); p.counted && move && *move > 0) d.push_back(*move);
  if (d.empty()) return std::nullopt;
  std::sort(d.begin(), d.end());
  const std::size_t n = d.size();
  return n % 2 ? d[n / 2] : 0.5 * (d[n / 2 - 1] + d[n / 2]);
}

namespace {

// The number the verdict came from: the GPU run's where it judged, else this machine's.
std::string judged_value(const CsvRows& t, std::size_t r) {
  const std::string why = t.cell(r, "why");
  if (why.rfind("GPU run", 0) == 0) return t.cell(r, "gpu_value");
  if (why.rfind("this machine", 0) == 0) return t.cell(r, "local_value");
  return "-";
}

// Whether the claim's number came from a CSV the second run wrote again.
bool reads_a_rerun(const CsvRows& t, std::size_t r, const std::set<std::string>& rerun) {
  if (rerun.empty()) return true;
  for (const auto& [column, prefix] : {std::pair{"local_csv", ""}, std::pair{"gpu_csv", "cuda/"}}) {
    if (!t.has(column)) continue;
    std::istringstream files(t.cell(r, column));
    for (std::string f; files >> f;)
      if (rerun.count(prefix + f)) return true;
  }
  return false;
}

}  // namespace

Agreement compare_ledgers(const CsvRows& first, const CsvRows& second, const std::set<std::string>& rerun) {
  std::map<std::string, std::size_t> in_second;
  for (std::size_t r = 0; r < second.size(); ++r) in_second[second.cell(r, "claim")] = r;
  if (first.size() != second.size())
    throw Error(first.label() + " holds " + std::to_string(first.size()) + " claims and " + second.label() + " " +
                std::to_string(second.size()) + ": ledgers of two commits, not two runs of one");
  Agreement a;
  for (std::size_t r = 0; r < first.size(); ++r) {
    const std::string id = first.cell(r, "claim");
    const auto it = in_second.find(id);
    if (it == in_second.end()) throw Error(second.label() + " has no claim " + id);
    VerdictPair p{id, first.cell(r, "verdict"), second.cell(it->second, "verdict"), judged_value(first, r),
                  judged_value(second, it->second)};
    p.counted = (is_run_verdict(p.first) || is_run_verdict(p.second)) && reads_a_rerun(first, r, rerun);
    if (p.counted) {
      ++a.run_verdicts;
      a.same += p.first == p.second;
    }
    a.pairs.push_back(p);
  }
  return a;
}

std::string stability_csv(const Agreement& a, const std::string& runs) {
  CsvTable t({"claim", "first_verdict", "second_verdict", "same", "first_value", "second_value", "runs"});
  for (const VerdictPair& p : a.pairs) {
    t.add_row({p.claim, p.first, p.second, !p.counted ? "-" : p.first == p.second ? "yes" : "no", p.first_value,
               p.second_value, runs});
  }
  return t.to_string(nullptr);
}

}  // namespace moebench
