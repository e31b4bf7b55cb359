#include "comm/eager_sends.h"
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include "comm/nccl_order.h"
#include "runtime/watchdog.h"

namespace moebench {
namespace {

struct Pending {
  MPI_Request request;
  std::unique_ptr<char[]> copy;
  MPI_Comm comm;
  int peer;
  std::size_t bytes;
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

void eager_send(const void* buf, int count, MPI_Datatype type, std::size_t bytes, std::size_t capacity, int peer,
                int tag, MPI_Comm comm) {
  EagerSends& s = eager_sends();
  Pending p{MPI_REQUEST_NULL, std::make_unique<char[]>(bytes ? bytes : 1), comm, peer, bytes};
  std::memcpy(p.copy.get(), buf, bytes);
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    auto fits = [&] {
      std::size_t held = 0;
      for (const Pending& q : s.pending)
        if (q.comm == comm && q.peer == peer) held += q.bytes;
      return held + bytes <= capacity;
    };
    if (!fits()) {
      Watchdog::Scope watch("a send waiting for room in its connection's buffer at the peer, which the sends "
                            "before it fill until received (NCCL order)");
      s.changed.wait(lock, fits);
    }
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

std::vector<std::size_t> connection_bytes(MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<std::size_t> out(std::size_t(size), nccl_order_settings().connection_bytes(false));
  MPI_Comm node;
  {
    Watchdog::Scope watch("finding the ranks of this node on a new communicator (NCCL order's buffers)");
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  }
  MPI_Group all, local;
  MPI_Comm_group(comm, &all);
  MPI_Comm_group(node, &local);
  int local_size = 0;
  MPI_Group_size(local, &local_size);
  const auto n_local = static_cast<std::size_t>(local_size);
  std::vector<int> local_ranks(n_local), in_comm(n_local);
  for (int i = 0; i < local_size; ++i) local_ranks[std::size_t(i)] = i;
  MPI_Group_translate_ranks(local, local_size, local_ranks.data(), all, in_comm.data());
  for (int r : in_comm) out[std::size_t(r)] = nccl_order_settings().connection_bytes(true);
  MPI_Group_free(&local);
  MPI_Group_free(&all);
  MPI_Comm_free(&node);
  return out;
}

}  // namespace moebench
