#include "harness/progress.h"
#include <algorithm>
#include <cstdio>
#include <regex>
#include "runtime/allocator.h"

namespace moebench {

namespace {
std::string duration_text(double s) {
  char buf[32];
  if (s < 120)
    std::snprintf(buf, sizeof buf, "%.0f s", s);
  else if (s < 7200)
    std::snprintf(buf, sizeof buf, "%.0f min", s / 60);
  else
    std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  return buf;
}
}  // namespace

std::size_t selected_count(const std::vector<std::string>& names, const std::string& filter) {
  if (filter.empty() || filter == "." || filter == "all") return names.size();
  const bool negative = filter[0] == '-';
  std::regex re;
  try {
    re = std::regex(negative ? filter.substr(1) : filter, std::regex::extended);
  } catch (const std::regex_error&) {
    return 0;  // Google Benchmark refuses it too, and says so
  }
  return std::size_t(std::count_if(names.begin(), names.end(),
                                   [&](const std::string& n) { return std::regex_search(n, re) != negative; }));
}

double RunProgress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void RunProgress::start(std::size_t cases, int repetitions, std::uint64_t largest_need, double free_per_rank) {
  cases_ = cases;
  start_ = std::chrono::steady_clock::now();
  if (!print_) return;
  std::printf("# %zu case(s) selected, %d repetition(s) each", cases, repetitions);
  if (largest_need > 0)
    std::printf("; the largest needs about %s per rank (%s free for each)", format_bytes(double(largest_need)).c_str(),
                format_bytes(free_per_rank).c_str());
  std::printf("\n");
  std::fflush(stdout);
}

void RunProgress::repetition_done(const std::string& name, int rep, int reps) {
  const double now = elapsed_s();
  if (!print_ || now - last_line_s_ < quiet_s_) return;
  last_line_s_ = now;
  std::printf("  ... %s: repetition %d of %d done, %s since the start\n", name.c_str(), rep, reps,
              duration_text(now).c_str());
  std::fflush(stdout);
}

std::string RunProgress::case_done() {
  ++done_;
  const double now = elapsed_s();
  last_line_s_ = now;
  const std::size_t total = std::max(cases_, done_);
  char line[96];
  if (done_ < total)
    std::snprintf(line, sizeof line, "[%zu/%zu, %s, ~%s left]", done_, total, duration_text(now).c_str(),
                  duration_text(now / double(done_) * double(total - done_)).c_str());
  else
    std::snprintf(line, sizeof line, "[%zu/%zu, %s]", done_, total, duration_text(now).c_str());
  return line;
}

}  // namespace moebench
