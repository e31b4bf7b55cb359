#include "comm/eager_sends.h"
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include "runtime/watchdog.h"

namespace moebench {
namespace {

struct Pending {
  MPI_Request request;
  std::unique_ptr<char[]> copy;
  MPI_Comm comm;
};

struct EagerSends {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<Pending> pending;
  std::once_flag started;

  // Tests the sends in flight every 50 us while there are any, asleep otherwise.
  void progress() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return !pending.empty(); });
      for (std::size_t i = 0; i < pending.size();) {
        int done = 0;
        MPI_Test(&pending[i].request, &done, MPI_STATUS_IGNORE);
        if (done) {
          pending[i] = std::move(pending.back());
          pending.pop_back();
        } else {
          ++i;
        }
      }
      changed.notify_all();  // a drain waits for its communicator's sends
      if (!pending.empty()) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        lock.lock();
      }
    }
  }
};

EagerSends& eager_sends() {
  static EagerSends* s = new EagerSends;  // never destroyed: its thread lives for the process
  std::call_once(s->started, [] { std::thread([] { eager_sends().progress(); }).detach(); });
  return *s;
}

}  // namespace

void eager_send(const void* buf, int count, MPI_Datatype type, std::size_t bytes, int peer, int tag, MPI_Comm comm) {
  EagerSends& s = eager_sends();
  Pending p{MPI_REQUEST_NULL, std::make_unique<char[]>(bytes ? bytes : 1), comm};
  std::memcpy(p.copy.get(), buf, bytes);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    MPI_Isend(p.copy.get(), count, type, peer, tag, comm, &p.request);
    s.pending.push_back(std::move(p));
  }
  s.changed.notify_all();
}

void drain_eager_sends(MPI_Comm comm) {
  EagerSends& s = eager_sends();
  std::unique_lock<std::mutex> lock(s.mutex);
  auto none_left = [&] {
    for (const Pending& p : s.pending)
      if (p.comm == comm) return false;
    return true;
  };
  if (none_left()) return;
  Watchdog::Scope watch("a small send's receive, before its communicator is freed (NCCL order)");
  s.changed.wait(lock, none_left);
}

}  // namespace moebench
