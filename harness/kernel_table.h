// The kernel log (runtime/kernel_log.h) of several runs of the same work, such as training steps,
// summarised per range path and kernel: its ops per run, the median milliseconds per run with
// their range, and its share of a run's span on the device (its first op's start to its last op's
// end). A kernel absent from a run counts 0 ms there. Where the device ran no op at all, on any
// stream, the gap is a row of its own under the path of the op it follows: kIdle where the next op
// has the same path (launches slower than the kernels), idle_until(the next op's path) where it
// does not (a host wait between ranges, such as the gate's read of the counts). Also the runs
// themselves, and the table's CSV cells, which every bench writing a kernel log shares.
#pragma once
#include "harness/csv.h"
#include <functional>
#include <string>
#include <vector>
#include "harness/spread.h"
#include "runtime/device.h"
#include "runtime/kernel_log.h"
#include "runtime/range.h"

namespace moebench {

struct KernelRow {
  std::string path;   // the range it ran under; kOutsideRanges when none
  std::string name;   // the kernel
  double calls = 0;   // per run (mean)
  Spread ms;          // per run
  double share = 0;   // its median over the median of the runs' spans
};

inline constexpr const char* kOutsideRanges = "(outside ranges)";
inline constexpr const char* kIdle = "(device idle)";
inline constexpr const char* kHostPrefix = "(host) ";
// "(device idle until PATH)"
std::string idle_until(const std::string& next_path);

// The slowest first; a run with no records is an Error (the log did not run). `spans`, if given,
// gets the runs' spans on the device.
std::vector<KernelRow> kernel_table(const std::vector<std::vector<KernelRecord>>& runs, Spread* spans = nullptr);

// The host's API calls of `runs` runs (HostCallRecord::run in [0, runs)), per path and function,
// the slowest first; `span_ms`: the runs' median span on the device, what `share` is over.
std::vector<KernelRow> host_call_rows(const std::vector<HostCallRecord>& calls, int runs, double span_ms);

struct KernelLogRuns {
  std::vector<KernelRow> rows;  // empty when the log did not run; the device's, then the host's
  std::string failure;          // why it did not
  Spread span_ms;               // the logged runs' spans on the device
};

// `run` (the work, its ranges timed into the breakdown it is handed, which gives each op its
// path) `runs` times, each with the log on and the device waited for, after one more run that
// warms the log up and is in no table. Every run happens, logged or not, so ranks whose runs hold
// collectives stay in step when one rank's log fails. `before`, if given, runs ahead of each run
// outside the log's runs (what the timed loop does untimed).
KernelLogRuns log_kernel_runs(const Device& device, int runs, const std::function<void(Breakdown&)>& run,
                              const std::function<void()>& before = {});

// The CSV columns of a kernel table whose runs are `unit`s ("step": calls_per_step, steps), and
// its rows' cells in that order; where the log did not run, one row of cells saying why.
std::vector<std::string> kernel_columns(const std::string& unit);
std::vector<std::vector<std::string>> kernel_cells(const KernelLogRuns& log);
// A kernel table's columns between a bench's own: `lead`, then kernel_columns(unit), then `tail`.
std::vector<std::string> kernel_table_columns(const std::vector<std::string>& lead, const std::string& unit,
                                              const std::vector<std::string>& tail);
// The log's rows into `t`, each between the same `lead` and `tail` cells.
void add_kernel_rows(CsvTable& t, const KernelLogRuns& log, const std::vector<std::string>& lead,
                     const std::vector<std::string>& tail);
// A row of the device's idle time (kIdle, idle_until()), not of an op.
bool is_idle(const KernelRow& row);
// A row of the host's API calls (host_call_rows()), not of an op.
bool is_host(const KernelRow& row);
// "slowest kernels: NAME in PATH 12.3%, ..." (the first `count` ops), then "; device idle 4.5%,
// the most NAME in PATH 2.1%" where the device sat idle, then "; the host in API calls 3.4%"
// where they were logged; or why there is no log.
std::string slowest_kernels(const KernelLogRuns& log, std::size_t count = 3);
// "a logged run spans X ms on the device [min .. max] against Y ms measured without the log (Zx)":
// the log's own cost, on CUDA CUPTI's callback on every API call and its records, is host time
// that its runs' idle rows hold and the measured runs did not spend. Or why there is no log.
std::string logged_against_measured(const KernelLogRuns& log, double measured_ms);

}  // namespace moebench
