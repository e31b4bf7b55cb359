#include "harness/kernel_table.h"
#include <algorithm>
#include <map>
#include "kernels/exec.h"

namespace moebench {

std::vector<KernelRow> kernel_table(const std::vector<std::vector<KernelRecord>>& runs) {
  if (runs.empty()) throw Error("kernel_table: no runs");
  struct Sums {
    std::vector<double> ms;
    double calls = 0;
  };
  std::map<std::pair<std::string, std::string>, Sums> by_kernel;
  std::vector<double> totals(runs.size(), 0.0);
  for (std::size_t r = 0; r < runs.size(); ++r) {
    if (runs[r].empty()) throw Error("kernel_table: run " + std::to_string(r) + " logged no ops");
    for (const KernelRecord& k : runs[r]) {
      Sums& s = by_kernel[{k.path.empty() ? kOutsideRanges : k.path, k.name}];
      s.ms.resize(runs.size(), 0.0);  // a run without this kernel keeps its 0
      s.ms[r] += k.ms;
      s.calls += 1;
      totals[r] += k.ms;
    }
  }
  const double total = spread_of(totals).median;
  std::vector<KernelRow> rows;
  for (const auto& [key, s] : by_kernel) {
    KernelRow row{key.first, key.second, s.calls / double(runs.size()), spread_of(s.ms), 0.0};
    row.share = total > 0 ? row.ms.median / total : 0.0;
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const KernelRow& a, const KernelRow& b) { return a.ms.median > b.ms.median; });
  return rows;
}

}  // namespace moebench
