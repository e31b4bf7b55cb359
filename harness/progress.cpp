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

RunProgress::~RunProgress() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

double RunProgress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void RunProgress::line(const std::string& text) {
  last_line_s_ = elapsed_s();
  if (!print_) return;
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

void RunProgress::start(std::size_t cases, int repetitions, std::uint64_t largest_need, double free_per_rank) {
  std::lock_guard<std::mutex> lock(mu_);
  cases_ = cases;
  repetitions_ = std::size_t(std::max(repetitions, 1)) * cases;
  start_ = std::chrono::steady_clock::now();
  std::string text = "# " + std::to_string(cases) + " case(s) selected, " + std::to_string(repetitions) + " repetition(s) each";
  if (largest_need > 0)
    text += "; the largest needs about " + format_bytes(double(largest_need)) + " per rank (" + format_bytes(free_per_rank) +
            " free for each)";
  line(text);
  if (print_ && !watcher_.joinable()) watcher_ = std::thread([this] { watch(); });
}

void RunProgress::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::duration<double>(std::max(0.05, quiet_s_ / 10)));
    // Every quiet_s at first, then every tenth of the time so far: an hour-long run says so every 6 min.
    if (!stop_ && !running_.empty() && elapsed_s() - last_line_s_ >= std::max(quiet_s_, 0.1 * elapsed_s()))
      line("  ... " + running_ + " still running, " + duration_text(elapsed_s()) + " since the start");
  }
}

void RunProgress::repetition_started(const std::string& name, int rep, int reps) {
  std::lock_guard<std::mutex> lock(mu_);
  running_ = name + ": repetition " + std::to_string(rep) + " of " + std::to_string(reps);
}

void RunProgress::repetition_done(const std::string& name, int rep, int reps) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.clear();
  ++repetitions_done_;
  if (elapsed_s() - last_line_s_ < quiet_s_) return;
  line("  ... " + name + ": repetition " + std::to_string(rep) + " of " + std::to_string(reps) + " done, " +
       duration_text(elapsed_s()) + " since the start");
}

std::string RunProgress::case_done() {
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  const double now = elapsed_s();
  last_line_s_ = now;
  const std::size_t total = std::max(cases_, done_);
  // The pace of the repetitions, not of the cases: the cases' rounds interleave, so most cases end
  // in the last round.
  const std::size_t reps_total = std::max(repetitions_, repetitions_done_);
  const double left = repetitions_done_ ? now / double(repetitions_done_) * double(reps_total - repetitions_done_)
                                        : now / double(done_) * double(total - done_);
  char text[96];
  if (done_ < total)
    std::snprintf(text, sizeof text, "[%zu/%zu, %s, ~%s left]", done_, total, duration_text(now).c_str(),
                  duration_text(left).c_str());
  else
    std::snprintf(text, sizeof text, "[%zu/%zu, %s]", done_, total, duration_text(now).c_str());
  return text;
}

}  // namespace moebench
