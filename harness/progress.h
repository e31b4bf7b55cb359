// What a bench run says while it runs, on rank 0: before the first measurement, the cases the
// filter selected, their repetitions and the largest memory need the program declared; after
// each case, how many are done, the time since the start and, from the pace so far, about how
// long the rest will take; and inside a slow case (a repetition ending 10 s or more after the
// last line), a line per repetition, so a paper-scale run on a small machine is never silent
// for minutes.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

// How many of `names` (Google Benchmark's full run names) `filter` selects: its POSIX extended
// regular expression searched in each name, a leading '-' selecting those it does not match;
// "", "." and "all" select every one.
std::size_t selected_count(const std::vector<std::string>& names, const std::string& filter);

class RunProgress {
 public:
  // `quiet_s`: a repetition ending this long after the last line gets a line of its own.
  explicit RunProgress(bool print, double quiet_s = 10) : print_(print), quiet_s_(quiet_s) {}
  // Before the first case: what will run and what it needs (need 0: not declared).
  void start(std::size_t cases, int repetitions, std::uint64_t largest_need, double free_per_rank);
  // After repetition `rep` (1-based) of `reps` of `name`.
  void repetition_done(const std::string& name, int rep, int reps);
  // The prefix of a finished case's line: "[3/12, 40 s, ~80 s left]".
  std::string case_done();

 private:
  double elapsed_s() const;
  bool print_;
  double quiet_s_;
  std::size_t cases_ = 0, done_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double last_line_s_ = 0;
};

}  // namespace moebench
