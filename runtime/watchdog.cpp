#include "runtime/watchdog.h"
#include "runtime/peer_probe.h"
#include "runtime/peer_wait.h"
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace moebench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSlots = Watchdog::kSlots;
const char* const kClaiming = "";

struct Slot {
  std::atomic<const char*> operation{nullptr};
  std::atomic<std::int64_t> started_ns{0};
};

struct WatchdogState {
  std::atomic<double> timeout_s{Watchdog::kDefaultTimeoutSeconds};
  std::array<Slot, kSlots> slots;
  std::atomic<std::int64_t> unwatched{0};
  std::string program = "moebench";
  int rank = 0;
  std::once_flag thread_started;
};

WatchdogState& watchdog_state() {
  static WatchdogState* s = new WatchdogState;  // never destroyed: the watcher thread may outlive static destructors
  return *s;
}

std::int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

void watch() {
  WatchdogState& s = watchdog_state();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::duration<double>(Watchdog::kPollSeconds));
    const double limit = s.timeout_s.load();
    for (Slot& slot : s.slots) {
      const char* op = slot.operation.load();
      if (!op || op == kClaiming) continue;
      const double waited = double(now_ns() - slot.started_ns.load()) / 1e9;
      if (waited > limit && slot.operation.load() == op) {
        // Which peers still answer (at most kProbeSeconds more): the line names the ones that do not.
        const std::string silent = PeerProbe::silent_peers(Watchdog::kProbeSeconds);
        const std::string who =
            silent.empty() ? "every peer rank still answers, so one is far behind or waits in turn"
                           : silent + (silent.find(';') != std::string::npos || silent.rfind("ranks ", 0) == 0
                                           ? " do not answer (stopped, dead or cut off)"
                                           : " does not answer (stopped, dead or cut off)");
        std::fprintf(stderr,
                     "%s: rank %d: error: %s did not complete within %g s (--comm-timeout; ended after %.2f s); %s, "
                     "so the job is ended\n",
                     s.program.c_str(), s.rank, op, limit, waited, who.c_str());
        std::fflush(stderr);
        // Still answering the probes of peers whose own waits run out a little later, so that
        // their lines name the rank that stopped, not this one, which is ending.
        if (PeerProbe::has_peers()) std::this_thread::sleep_for(std::chrono::duration<double>(Watchdog::kProbeSeconds));
        // An abort can itself wait (NCCL's synchronises with a stream other communicators' kernels
        // still hold, or waits for a captured graph): past kAbortSeconds the process ends without it.
        std::thread([program = s.program, rank = s.rank] {
          std::this_thread::sleep_for(std::chrono::duration<double>(Watchdog::kAbortSeconds));
          std::fprintf(stderr, "%s: rank %d: error: the communicators' abort did not return within %g s; ended without it\n",
                       program.c_str(), rank, Watchdog::kAbortSeconds);
          std::fflush(stderr);
          std::_Exit(1);
        }).detach();
        abort_registered_comms();  // NCCL's kernels stop waiting for the peer (ncclCommAbort)
        std::_Exit(1);  // the launcher sees a rank end without finalizing and ends the others
      }
    }
  }
}

}  // namespace

void Watchdog::set_timeout(double seconds) { watchdog_state().timeout_s = seconds; }
double Watchdog::timeout() { return watchdog_state().timeout_s; }

void Watchdog::set_identity(const char* program, int rank) {
  watchdog_state().program = program;
  watchdog_state().rank = rank;
}

Watchdog::Scope::Scope(const char* operation) : slot_(-1) {
  WatchdogState& s = watchdog_state();
  std::call_once(s.thread_started, [] { std::thread(watch).detach(); });
  for (int i = 0; i < kSlots; ++i) {
    const char* expected = nullptr;
    // Claim the slot first, then start its clock, then name the operation: the watcher never
    // sees an operation with a stale start.
    if (s.slots[i].operation.compare_exchange_strong(expected, kClaiming)) {
      s.slots[i].started_ns = now_ns();
      s.slots[i].operation = operation;
      slot_ = i;
      return;
    }
  }
  // More operations in flight than slots: this one goes unwatched rather than blocking.
  ++s.unwatched;
}

int Watchdog::watched() {
  int n = 0;
  for (const Slot& slot : watchdog_state().slots) n += slot.operation.load() != nullptr;
  return n;
}

std::int64_t Watchdog::unwatched() { return watchdog_state().unwatched.load(); }

Watchdog::Scope::~Scope() {
  if (slot_ >= 0) watchdog_state().slots[slot_].operation = nullptr;
}

}  // namespace moebench
