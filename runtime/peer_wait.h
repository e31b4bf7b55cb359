// Host waits that can block on a peer rank, each with a deadline. On CUDA the host waits for a
// stream or an event that holds communication (NCCL's kernels wait for their peers on the GPU),
// for a barrier, and inside NCCL's own calls (its first use of a communicator connects to the
// peers on the host). Each such wait runs under the watchdog (--comm-timeout), and each poll
// asks every live communicator for an asynchronous error: an error aborts the communicators and
// throws Error naming the wait; a wait past the timeout ends the process through the watchdog,
// which aborts the communicators (ncclCommAbort) before it exits, so that the ranks' NCCL
// kernels stop and the launcher ends the job. On the CPU the communication itself runs under
// the watchdog on the streams' workers (comm/comm_mpi.cpp), so a wait there ends the same way.
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include "kernels/exec.h"
#include "runtime/watchdog.h"

namespace moebench {

struct CommHealth {
  std::function<std::string()> async_error;  // "" while healthy
  std::function<void()> abort;
  // Around every abort at once, where the library groups them (NCCL's ncclGroupStart/End): each
  // communicator's abort flag is set before any of them reclaims, so none waits behind another's
  // kernels still spinning on the same stream.
  std::function<void()> group_start, group_end;
};

// A communicator registers while it lives (`key`: its address).
void register_comm_health(const void* key, CommHealth health);
void unregister_comm_health(const void* key);
// The first asynchronous error of a registered communicator, or "".
std::string comm_async_error();
// Aborts every registered communicator (the watchdog's last act; also after an async error).
void abort_registered_comms();

// Polls `done` until it returns true, under the watchdog as `operation` (a string that outlives
// the call), checking the communicators' asynchronous errors between polls; throws Error on one.
template <class Done>
void wait_for_peers(const char* operation, Done done) {
  if (done()) return;
  Watchdog::Scope watch(operation);
  auto pause = std::chrono::microseconds(2);
  for (;;) {
    if (done()) return;
    if (const std::string error = comm_async_error(); !error.empty()) {
      abort_registered_comms();
      throw Error(std::string(operation) + ": a communicator failed: " + error);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
}

}  // namespace moebench
