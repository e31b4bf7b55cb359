// A per-rank timeline of what ran on which stream, written as Chrome / Perfetto trace JSON
// (chrome://tracing or ui.perfetto.dev), so overlap and pipeline bubbles can be seen on any
// machine; NVTX ranges stay for Nsight. One track per stream; breakdown ranges carry the CSV
// column names, CPU stream ops their kernel names, communicator ops their bytes. Off until
// enable(); recording costs a lock and a vector push per op.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace moebench {

class Event;

// One op or range as recorded: its track (stream id), name, JSON args body and times.
struct TimelineEntry {
  int track = 0;
  std::string name, args;
  double start_us = 0, end_us = 0;
  bool range = false;  // a breakdown range (ScopedRange), not an op
};

class Timeline {
 public:
  static void enable(int rank);
  // Stops recording (what was recorded stays until clear()).
  static void disable();
  static bool enabled();
  // Microseconds on the steady clock since the process started: the time base of every entry.
  static double now_us();
  static void name_track(int track, const std::string& name);
  // A finished op on a track; `args` is a JSON object body ("\"bytes\": 4096") or empty.
  static void record_op(int track, const char* name, double start_us, double end_us, const std::string& args = {});
  // Details of the op running on this thread (a CPU stream worker), attached to its entry:
  // a JSON object body. take_op_args() hands them over and clears them.
  static void set_op_args(std::string args);
  static std::string take_op_args();
  // A range whose times are known once its events complete (CUDA events): resolved at write().
  static void record_range(int track, const std::string& name, std::shared_ptr<Event> start, std::shared_ptr<Event> stop);
  // Everything recorded so far, ranges resolved (waits for their events), in recording order:
  // what the mechanism tests read.
  static std::vector<TimelineEntry> entries();
  // Writes everything recorded so far as trace JSON (atomically). Throws Error on failure.
  static void write(const std::string& path);
  // Forgets what was recorded (tests).
  static void clear();
};

}  // namespace moebench
