// Ends the whole job when a communication operation does not complete in time, on the CPU
// backend too (a blocking MPI call waiting for a stopped or dead peer never returns). A
// background thread watches the operations in flight (several at once: one per stream worker
// and the host); past the timeout it prints the rank and the operation and exits, and the
// launcher then ends every other rank. On CUDA the host's waits on peers run under it too.
// It fires within the timeout plus one poll interval (kPollSeconds) and the time the watcher
// thread takes to be scheduled, then asks the peers which still answer (runtime/peer_probe.h; at
// most kProbeSeconds) and names those that do not, and answers theirs for kProbeSeconds more. Before it exits it aborts the communicators registered in
// runtime/peer_wait.h (NCCL's), so no kernel of this rank keeps waiting for its peers; an abort
// that does not return within kAbortSeconds does not keep the process alive.
#pragma once
#include <cstdint>

namespace moebench {

class Watchdog {
 public:
  // Operations watched at once (one per stream worker and the host is far fewer); one started
  // while every slot is taken runs unwatched rather than blocking, and is counted.
  static constexpr int kSlots = 64;
  static constexpr double kPollSeconds = 0.05;
  static constexpr double kProbeSeconds = 2.0;
  // How long the communicators' abort may take before the process ends without it.
  static constexpr double kAbortSeconds = 5.0;
  // --comm-timeout's default, its one place.
  static constexpr double kDefaultTimeoutSeconds = 300.0;
  // Seconds an operation may take (--comm-timeout); applies to operations started afterwards.
  // The one route by which the timeout reaches every wait: the harness sets it before any
  // communicator exists, and the communicators read it here.
  static void set_timeout(double seconds);
  static double timeout();
  // The rank and program named in the message.
  static void set_identity(const char* program, int rank);
  // Operations in flight and watched now; operations that ran unwatched (every slot taken).
  static int watched();
  static std::int64_t unwatched();

  // Marks `operation` (a string literal or one that outlives the scope) in flight.
  class Scope {
   public:
    explicit Scope(const char* operation);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    int slot_;
  };
};

}  // namespace moebench
