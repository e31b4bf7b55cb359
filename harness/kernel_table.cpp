#include "harness/kernel_table.h"
#include <algorithm>
#include <cstdio>
#include <map>
#include "harness/csv.h"
#include "kernels/exec.h"

namespace moebench {

std::string idle_until(const std::string& next_path) { return "(device idle until " + next_path + ")"; }

namespace {

// The run's ops with, between them, where the device ran none: each gap from the end of every op
// begun before it (on any stream) to the next op's start, under the path of the op it follows.
// An op whose start the log could not tell (start_ms < 0) counts its time and bounds no gap.
std::vector<KernelRecord> with_idle(std::vector<KernelRecord> ops, double* span) {
  std::stable_sort(ops.begin(), ops.end(), [](const KernelRecord& a, const KernelRecord& b) { return a.start_ms < b.start_ms; });
  std::vector<KernelRecord> out;
  out.reserve(2 * ops.size());
  double first = 0, busy_until = 0, untimed = 0;
  const KernelRecord* last_to_end = nullptr;
  for (const KernelRecord& op : ops) {
    if (op.start_ms < 0) {
      untimed += op.ms;
    } else if (!last_to_end) {
      first = op.start_ms;
    } else if (op.start_ms > busy_until) {
      const bool same = op.path == last_to_end->path;
      out.push_back(KernelRecord{same ? kIdle : idle_until(op.path.empty() ? kOutsideRanges : op.path),
                                 last_to_end->path, op.start_ms - busy_until, busy_until});
    }
    out.push_back(op);
    if (op.start_ms < 0) continue;
    if (!last_to_end || op.start_ms + op.ms >= busy_until) {
      busy_until = op.start_ms + op.ms;
      last_to_end = &op;
    }
  }
  *span = busy_until - first + untimed;
  return out;
}

// Per (path, name): its milliseconds in each run (0 in a run without it) and its calls in all.
class RunSums {
 public:
  explicit RunSums(std::size_t runs) : runs_(runs) {}
  void add(const std::string& path, const std::string& name, std::size_t run, double ms, double calls) {
    Sums& s = by_row_[{path.empty() ? kOutsideRanges : path, name}];
    s.ms.resize(runs_, 0.0);
    s.ms[run] += ms;
    s.calls += calls;
  }
  // Calls per run, the median run's milliseconds and their share of `span_ms`; the slowest first.
  std::vector<KernelRow> rows(double span_ms) const {
    std::vector<KernelRow> out;
    for (const auto& [key, s] : by_row_) {
      KernelRow row{key.first, key.second, s.calls / double(runs_), spread_of(s.ms), 0.0};
      row.share = span_ms > 0 ? row.ms.median / span_ms : 0.0;
      out.push_back(std::move(row));
    }
    std::stable_sort(out.begin(), out.end(), [](const KernelRow& a, const KernelRow& b) { return a.ms.median > b.ms.median; });
    return out;
  }

 private:
  struct Sums {
    std::vector<double> ms;
    double calls = 0;
  };
  std::size_t runs_;
  std::map<std::pair<std::string, std::string>, Sums> by_row_;
};

}  // namespace

std::vector<KernelRow> kernel_table(const std::vector<std::vector<KernelRecord>>& runs, Spread* spans_out) {
  if (runs.empty()) throw Error("kernel_table: no runs");
  RunSums sums(runs.size());
  std::vector<double> spans(runs.size(), 0.0);
  for (std::size_t r = 0; r < runs.size(); ++r) {
    if (runs[r].empty()) throw Error("kernel_table: run " + std::to_string(r) + " logged no ops");
    for (const KernelRecord& k : with_idle(runs[r], &spans[r])) sums.add(k.path, k.name, r, k.ms, 1);
  }
  if (spans_out) *spans_out = spread_of(spans);
  return sums.rows(spread_of(spans).median);
}

std::vector<KernelRow> host_call_rows(const std::vector<HostCallRecord>& calls, int runs, double span_ms) {
  RunSums sums(std::size_t(std::max(runs, 0)));
  for (const HostCallRecord& c : calls)
    if (c.run >= 0 && c.run < runs) sums.add(c.path, kHostPrefix + c.function, std::size_t(c.run), c.ms, c.calls);
  return sums.rows(span_ms);
}

KernelLogRuns log_kernel_runs(const Device& device, int runs, const std::function<void(Breakdown&)>& run,
                              const std::function<void()>& before) {
  KernelLogRuns out;
  out.failure = KernelLog::start(device.backend());
  // Run -1 is a warm-up in no table: the host's cost of starting the log (CUPTI's first records
  // and callbacks) falls in it, where it would otherwise show as the device idle in the first
  // range of the first run.
  for (int r = -1; r < runs; ++r) {
    if (before) {
      KernelLog::set_run(KernelLog::kNoRun);
      before();
      device.synchronize();
    }
    KernelLog::set_run(r < 0 ? KernelLog::kNoRun : r);
    Breakdown ranges;
    run(ranges);
    KernelLog::set_run(KernelLog::kNoRun);  // the wait below is the table's, not the run's host work
    device.synchronize();
  }
  const std::vector<KernelRecord> records = KernelLog::stop();  // none where the log did not start
  if (!out.failure.empty()) return out;
  std::vector<std::vector<KernelRecord>> logged(std::size_t(std::max(runs, 0)));
  for (const KernelRecord& k : records)
    if (k.run >= 0 && k.run < runs) logged[std::size_t(k.run)].push_back(k);
  if (logged.empty() || std::any_of(logged.begin(), logged.end(), [](const auto& ops) { return ops.empty(); }))
    out.failure = "a run's log held no op (on cuda: CUPTI delivered no records)";
  else
    out.rows = kernel_table(logged, &out.span_ms);
  if (out.failure.empty())
    for (KernelRow& row : host_call_rows(KernelLog::host_calls(), runs, out.span_ms.median)) out.rows.push_back(std::move(row));
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

bool is_idle(const KernelRow& row) { return row.name.rfind("(device idle", 0) == 0; }

bool is_host(const KernelRow& row) { return row.name.rfind(kHostPrefix, 0) == 0; }

std::string slowest_kernels(const KernelLogRuns& log, std::size_t count) {
  if (!log.failure.empty()) return "no kernel log: " + log.failure;
  std::string out = "slowest kernels:";
  char share[32];
  std::size_t listed = 0;
  double idle = 0, host = 0;
  const KernelRow* largest_gap = nullptr;
  for (const KernelRow& row : log.rows) {
    if (is_host(row)) {
      host += row.share;
    } else if (is_idle(row)) {
      idle += row.share;
      if (!largest_gap) largest_gap = &row;  // the rows run slowest first
    } else if (listed < count) {
      std::snprintf(share, sizeof share, " %.1f%%", 100 * row.share);
      out += std::string(listed++ ? "," : "") + " " + row.name + " in " + row.path + share;
    }
  }
  if (largest_gap) {
    std::snprintf(share, sizeof share, "%.1f%%", 100 * idle);
    out += std::string("; device idle ") + share + ", the most " + largest_gap->name + " in " + largest_gap->path;
    std::snprintf(share, sizeof share, " %.1f%%", 100 * largest_gap->share);
    out += share;
  }
  if (host > 0) {
    std::snprintf(share, sizeof share, "%.1f%%", 100 * host);
    out += std::string("; the host in API calls ") + share;
  }
  return out;
}

std::string logged_against_measured(const KernelLogRuns& log, double measured_ms) {
  if (!log.failure.empty()) return "no kernel log: " + log.failure;
  char out[200];
  std::snprintf(out, sizeof out, "a logged run spans %s ms on the device [%s .. %s] against %s ms measured without the log (%.2fx)",
                fmt(log.span_ms.median, 4).c_str(), fmt(log.span_ms.min, 4).c_str(), fmt(log.span_ms.max, 4).c_str(),
                fmt(measured_ms, 4).c_str(), measured_ms > 0 ? log.span_ms.median / measured_ms : 0.0);
  return out;
}

std::vector<std::string> kernel_table_columns(const std::vector<std::string>& lead, const std::string& unit,
                                              const std::vector<std::string>& tail) {
  std::vector<std::string> cols = lead;
  for (const auto& c : kernel_columns(unit)) cols.push_back(c);
  cols.insert(cols.end(), tail.begin(), tail.end());
  return cols;
}

void add_kernel_rows(CsvTable& t, const KernelLogRuns& log, const std::vector<std::string>& lead,
                     const std::vector<std::string>& tail) {
  for (auto& row : kernel_cells(log)) {
    row.insert(row.begin(), lead.begin(), lead.end());
    row.insert(row.end(), tail.begin(), tail.end());
    t.add_row(row);
  }
}

}  // namespace moebench
