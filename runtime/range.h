// A breakdown range is one object that both times a named region on a stream and emits an
// NVTX range of the same name in the "moebench" domain, so the Nsight Systems timeline, the
// trace JSON (runtime/timeline.h) and the CSV columns use the same names. Times are read after
// the work (events complete asynchronously). Ranges of one breakdown nest by the host's scopes,
// whatever their streams: each is also recorded under its path ("outer/inner"), so a step's
// breakdown reads as a tree (harness/range_tree.h).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>
#include "runtime/device.h"

namespace moebench {

class Breakdown {
 public:
  // `path`: where the range sat among the open ones (open()); empty: the name alone.
  void add(std::string name, std::shared_ptr<Event> start, std::shared_ptr<Event> stop, std::string path = "");
  // A range `name` opens inside those open now; returns its path. close() ends the innermost.
  std::string open(std::string_view name);
  void close();
  struct PathTotal {
    std::string path;
    double ms = 0;  // summed over its ranges
    int calls = 0;  // ranges recorded under it
  };
  // Per path, in the order the paths were first opened (a parent before its children).
  std::vector<PathTotal> path_totals() const;
  // Total milliseconds per name, summed over every range recorded since clear().
  std::map<std::string, double> totals_ms() const;
  // Milliseconds during which at least one range of the `names` was open (ranges on several
  // streams that overlap count once).
  double union_ms(const std::vector<std::string>& names) const;
  // Names in first-recorded order.
  const std::vector<std::string>& names() const { return order_; }
  void clear();

 private:
  struct Span { std::string name, path; std::shared_ptr<Event> start, stop; };
  std::vector<Span> spans_;
  std::vector<std::string> order_, path_order_, open_;
};

class ScopedRange {
 public:
  // `breakdown` may be null: then only the NVTX range is emitted. On a stream being captured
  // into a graph (runtime/stream_graph.h) the range is NVTX only, at capture.
  ScopedRange(std::string_view name, const Stream& stream, Breakdown* breakdown = nullptr);
  ~ScopedRange();
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;

 private:
  std::string name_;
  const Stream& stream_;
  Breakdown* breakdown_;
  std::string path_;              // when timed into the breakdown (then also this thread's current path)
  std::shared_ptr<Event> start_, stop_;  // when timed or traced; both made before the start is
                                         // recorded, so the span holds no event's creation
};

// The path of the innermost range open on this thread that is timed into a breakdown ("" when
// none): the range an op enqueued now runs under (runtime/kernel_log.h).
const std::string& current_range_path();

// NVTX push/pop in the moebench domain (no-ops in a build without NVTX headers).
void nvtx_push(const char* name);
void nvtx_pop();

}  // namespace moebench
