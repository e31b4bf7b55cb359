#include "harness/watchdog.h"
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace moebench {
namespace {

using Clock = std::chrono::steady_clock;

struct State {
  std::atomic<double> timeout_s{300.0};
  std::atomic<const char*> operation{nullptr};
  std::atomic<std::int64_t> started_ns{0};
  std::atomic<int> depth{0};
  std::string program = "moebench";
  int rank = 0;
  std::once_flag thread_started;
};

State& state() {
  static State* s = new State;  // never destroyed: the watcher thread may outlive static destructors
  return *s;
}

std::int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

void watch() {
  State& s = state();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const char* op = s.operation.load();
    if (!op || s.depth.load() == 0) continue;
    const double waited = double(now_ns() - s.started_ns.load()) / 1e9;
    const double limit = s.timeout_s.load();
    if (waited > limit && s.operation.load() == op && s.depth.load() > 0) {
      std::fprintf(stderr,
                   "%s: rank %d: error: %s did not complete within %g s (--comm-timeout); a peer rank is stopped, "
                   "dead or far behind, so the job is ended\n",
                   s.program.c_str(), s.rank, op, limit);
      std::fflush(stderr);
      std::_Exit(1);  // the launcher sees a rank end without finalizing and ends the others
    }
  }
}

}  // namespace

void Watchdog::set_timeout(double seconds) { state().timeout_s = seconds; }
double Watchdog::timeout() { return state().timeout_s; }

void Watchdog::set_identity(const char* program, int rank) {
  state().program = program;
  state().rank = rank;
}

Watchdog::Scope::Scope(const char* operation) {
  State& s = state();
  std::call_once(s.thread_started, [] { std::thread(watch).detach(); });
  if (s.depth.fetch_add(1) == 0) {  // nested operations count from the outermost
    s.started_ns = now_ns();
    s.operation = operation;
  }
}

Watchdog::Scope::~Scope() {
  State& s = state();
  if (s.depth.fetch_sub(1) == 1) s.operation = nullptr;
}

}  // namespace moebench
