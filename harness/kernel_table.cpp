#include "harness/kernel_table.h"
#include <algorithm>
#include <cstdio>
#include <map>
#include "harness/csv.h"
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

KernelLogRuns log_kernel_runs(const Device& device, int runs, const std::function<void(Breakdown&)>& run,
                              const std::function<void()>& before) {
  std::vector<std::vector<KernelRecord>> logged;
  KernelLogRuns out;
  for (int r = 0; r < runs; ++r) {
    Breakdown ranges;
    if (before) {
      before();
      device.synchronize();
    }
    if (out.failure.empty()) out.failure = KernelLog::start(device.backend());
    run(ranges);
    device.synchronize();
    if (KernelLog::on()) logged.push_back(KernelLog::stop());
  }
  if (!out.failure.empty()) return out;
  if (logged.empty() || std::any_of(logged.begin(), logged.end(), [](const auto& ops) { return ops.empty(); }))
    out.failure = "a run's log held no op (on cuda: CUPTI delivered no records)";
  else
    out.rows = kernel_table(logged);
  return out;
}

std::vector<std::string> kernel_columns(const std::string& unit) {
  return {"phase", "kernel", "calls_per_" + unit, "ms", "ms_min", "ms_max", "share_of_device_time", unit + "s"};
}

std::vector<std::vector<std::string>> kernel_cells(const KernelLogRuns& log) {
  std::vector<std::vector<std::string>> cells;
  if (!log.failure.empty()) {
    const std::string why = "n/a (no kernel log: " + log.failure + ")";
    cells.push_back({why, why, why, why, why, why, why, "0"});
  }
  for (const KernelRow& k : log.rows)
    cells.push_back({k.path, k.name, fmt(k.calls, 4), fmt(k.ms.median), fmt(k.ms.min), fmt(k.ms.max), fmt(k.share, 4),
                     std::to_string(k.ms.samples)});
  return cells;
}

std::string slowest_kernels(const KernelLogRuns& log, std::size_t count) {
  if (!log.failure.empty()) return "no kernel log: " + log.failure;
  std::string out = "slowest kernels:";
  char share[32];
  for (std::size_t i = 0; i < std::min(count, log.rows.size()); ++i) {
    std::snprintf(share, sizeof share, " %.1f%%", 100 * log.rows[i].share);
    out += std::string(i ? "," : "") + " " + log.rows[i].name + " in " + log.rows[i].path + share;
  }
  return out;
}

}  // namespace moebench
