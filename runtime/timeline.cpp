#include "runtime/timeline.h"
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>
#include "runtime/atomic_file.h"
#include "runtime/stream.h"

namespace moebench {

namespace {

struct PendingRange {
  int track;
  std::string name;
  std::shared_ptr<Event> start, stop;
};

struct State {
  std::atomic<bool> on{false};
  int rank = 0;
  std::mutex mutex;
  std::vector<TimelineEntry> entries;
  std::vector<PendingRange> ranges;
  std::map<int, std::string> tracks;
};

State& state() {
  static State* s = new State;  // outlives the stream workers that record into it
  return *s;
}

const std::chrono::steady_clock::time_point kStart = std::chrono::steady_clock::now();

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

}  // namespace

void Timeline::enable(int rank) {
  State& s = state();
  s.rank = rank;
  s.on = true;
}

void Timeline::disable() { state().on = false; }

bool Timeline::enabled() { return state().on; }

double Timeline::now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - kStart).count();
}

void Timeline::name_track(int track, const std::string& name) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.tracks[track] = name;
}

void Timeline::record_op(int track, const char* name, double start_us, double end_us, const std::string& args) {
  State& s = state();
  if (!s.on) return;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.entries.push_back(TimelineEntry{track, name, args, start_us, end_us, false});
}

namespace {
thread_local std::string t_op_args;
}

void Timeline::set_op_args(std::string args) { t_op_args = std::move(args); }

std::string Timeline::take_op_args() {
  std::string out;
  out.swap(t_op_args);
  return out;
}

void Timeline::record_range(int track, const std::string& name, std::shared_ptr<Event> start,
                            std::shared_ptr<Event> stop) {
  State& s = state();
  if (!s.on) return;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.ranges.push_back(PendingRange{track, name, std::move(start), std::move(stop)});
}

void Timeline::clear() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.entries.clear();
  s.ranges.clear();
}

std::vector<TimelineEntry> Timeline::entries() {
  State& s = state();
  std::vector<TimelineEntry> entries;
  std::vector<PendingRange> ranges;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    entries = s.entries;
    ranges = s.ranges;
  }
  for (const PendingRange& r : ranges)  // waits for their events
    entries.push_back(TimelineEntry{r.track, r.name, "\"range\": true", r.start->time_us(), r.stop->time_us(), true});
  return entries;
}

void Timeline::write(const std::string& path) {
  State& s = state();
  const std::vector<TimelineEntry> entries = Timeline::entries();
  std::map<int, std::string> tracks;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    tracks = s.tracks;
  }
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}}",
                s.rank, s.rank);
  out += buf;
  for (const auto& [track, name] : tracks) {
    std::snprintf(buf, sizeof buf, ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": ",
                  s.rank, track);
    out += buf + json_string(name) + "}}";
  }
  for (const TimelineEntry& e : entries) {
    std::snprintf(buf, sizeof buf, ",\n{\"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"name\": ", s.rank,
                  e.track, e.start_us, e.end_us - e.start_us);
    out += buf + json_string(e.name) + ", \"args\": {" + e.args + "}}";
  }
  out += "\n]}\n";
  write_file_atomic(path, out);
}

}  // namespace moebench
