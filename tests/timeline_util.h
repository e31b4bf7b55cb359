// Reading the runtime's own records in mechanism tests: the timeline (every CPU stream op with
// its details -- a GEMM's operands, a copy's bytes, a communicator op's bytes -- and every
// breakdown range), so a test asserts how a result was computed, not only what it is.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>
#include "runtime/timeline.h"

namespace moebench::testing_util {

// Records the timeline while it lives; the records are dropped when it ends.
class RecordedTimeline {
 public:
  explicit RecordedTimeline(int rank = 0) {
    Timeline::clear();
    Timeline::enable(rank);
  }
  ~RecordedTimeline() {
    Timeline::disable();
    Timeline::clear();
  }
  RecordedTimeline(const RecordedTimeline&) = delete;
  RecordedTimeline& operator=(const RecordedTimeline&) = delete;
  // Everything recorded so far (the streams must have reached their ends).
  std::vector<TimelineEntry> entries() const { return Timeline::entries(); }
};

inline bool has_arg(const TimelineEntry& e, const std::string& key) {
  return e.args.find("\"" + key + "\": ") != std::string::npos;
}

// The text of argument `key` up to the next ',' or ']' (or the end); empty if absent.
inline std::string arg_text(const TimelineEntry& e, const std::string& key) {
  const std::string tag = "\"" + key + "\": ";
  const auto at = e.args.find(tag);
  if (at == std::string::npos) return {};
  const auto from = at + tag.size();
  if (e.args[from] == '[') return e.args.substr(from, e.args.find(']', from) - from + 1);
  return e.args.substr(from, e.args.find(',', from) - from);
}

inline double number_arg(const TimelineEntry& e, const std::string& key) {
  const std::string t = arg_text(e, key);
  return t.empty() ? -1 : std::strtod(t.c_str(), nullptr);
}

// A pointer written as "0x..." ("(nil)": 0).
inline std::uintptr_t pointer_arg(const TimelineEntry& e, const std::string& key) {
  std::string t = arg_text(e, key);
  t.erase(std::remove(t.begin(), t.end(), '"'), t.end());
  return t.rfind("0x", 0) == 0 ? std::uintptr_t(std::strtoull(t.c_str() + 2, nullptr, 16)) : 0;
}

// A list argument "[1, 2, 3]".
inline std::vector<double> list_arg(const TimelineEntry& e, const std::string& key) {
  std::string t = arg_text(e, key);
  std::vector<double> out;
  if (t.size() < 2) return out;
  const char* p = t.c_str() + 1;
  while (*p && *p != ']') {
    char* end = nullptr;
    out.push_back(std::strtod(p, &end));
    if (end == p) break;
    p = end;
    while (*p == ',' || *p == ' ') ++p;
  }
  return out;
}

// Ranges named `name` (on `track`, or any track when it is negative), by start time.
inline std::vector<TimelineEntry> ranges_named(const std::vector<TimelineEntry>& all, const std::string& name,
                                               int track = -1) {
  std::vector<TimelineEntry> out;
  for (const TimelineEntry& e : all)
    if (e.range && e.name == name && (track < 0 || e.track == track)) out.push_back(e);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
  return out;
}

// Ops (not ranges) named `name` (any name where empty) on the range's track inside it, by start.
inline std::vector<TimelineEntry> ops_inside(const std::vector<TimelineEntry>& all, const TimelineEntry& range,
                                             const std::string& name = {}) {
  std::vector<TimelineEntry> out;
  for (const TimelineEntry& e : all)
    if (!e.range && e.track == range.track && (name.empty() || e.name == name) && e.start_us >= range.start_us &&
        e.end_us <= range.end_us)
      out.push_back(e);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
  return out;
}

// Microseconds during which both entries were running.
inline double overlap_us(const TimelineEntry& a, const TimelineEntry& b) {
  return std::max(0.0, std::min(a.end_us, b.end_us) - std::max(a.start_us, b.start_us));
}

// Whether [p, p + 1) lies in [base, base + bytes).
inline bool points_into(std::uintptr_t p, const void* base, std::size_t bytes) {
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  return p >= b && p < b + bytes;
}

}  // namespace moebench::testing_util
