// What a bench run says while it runs, on rank 0: before the first measurement, the cases the
// filter selected, their repetitions and the largest memory need the program declared; after
// each case, how many are done, the time since the start and, from the pace so far, about how
// long the rest will take; inside a slow case, a line per repetition that ends `quiet_s` or more
// after the last line; and while one repetition runs long, a line every `quiet_s` saying which
// one, so a paper-scale run on a small machine is never silent for minutes.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace moebench {

// How many of `names` (Google Benchmark's full run names) `filter` selects: its POSIX extended
// regular expression searched in each name, a leading '-' selecting those it does not match;
// "", "." and "all" select every one.
std::size_t selected_count(const std::vector<std::string>& names, const std::string& filter);

class RunProgress {
 public:
  explicit RunProgress(bool print, double quiet_s = 10) : print_(print), quiet_s_(quiet_s) {}
  ~RunProgress();
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;
  // Before the first case: what will run and what it needs (need 0: not declared).
  void start(std::size_t cases, int repetitions, std::uint64_t largest_need, double free_per_rank);
  // Around repetition `rep` (1-based) of `reps` of `name`.
  void repetition_started(const std::string& name, int rep, int reps);
  void repetition_done(const std::string& name, int rep, int reps);
  // The prefix of a finished case's line: "[3/12, 40 s, ~80 s left]".
  std::string case_done();

 private:
  double elapsed_s() const;
  void line(const std::string& text);  // printed, and the quiet time starts again
  void watch();                        // the thread that speaks while a repetition runs long
  const bool print_;
  const double quiet_s_;
  std::size_t cases_ = 0, done_ = 0;
  std::size_t repetitions_ = 0, repetitions_done_ = 0;  // of every case, expected and done
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  double last_line_s_ = 0;
  std::string running_;  // "name: repetition r of R", while one runs
  std::thread watcher_;
};

}  // namespace moebench
