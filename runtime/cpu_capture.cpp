#include "runtime/cpu_capture.h"
#include <algorithm>
#include <condition_variable>
#include <map>
#include <memory>

namespace moebench {

namespace {

// One replay's event: raised once, waited for by any number of ops.
struct ReplayEvent {
  std::mutex mutex;
  std::condition_variable raised_cv;
  bool raised = false;
  void raise() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      raised = true;
    }
    raised_cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    raised_cv.wait(lock, [&] { return raised; });
  }
};

}  // namespace

CpuCapture::CpuCapture(CpuQueue* origin) : origin_(origin), members_{origin} {
  if (origin->capture()) throw Error("stream " + origin->name() + ": a capture begins on a stream already being captured");
  origin->set_capture(this);
}

CpuCapture::~CpuCapture() {
  std::vector<CpuQueue*> members;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!open_) return;
    open_ = false;
    members = members_;
  }
  for (CpuQueue* q : members) q->set_capture(nullptr);
}

void CpuCapture::add_op(CpuQueue* q, const char* name, std::function<void()> op, std::string details,
                        std::function<void()> on_issue) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!open_) throw Error(std::string(name) + ": enqueued into a graph capture that has ended");
  nodes_.push_back(Node{q, name, std::move(op), std::move(details), -1, -1, std::move(on_issue)});
}

int CpuCapture::record(CpuQueue* q) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!open_) throw Error("an event recorded into a graph capture that has ended");
  const int slot = int(recorded_at_.size());
  recorded_at_.push_back(nodes_.size());
  nodes_.push_back(Node{q, "event", {}, {}, slot, -1, {}});
  return slot;
}

void CpuCapture::wait(CpuQueue* q, int slot) {
  bool joins = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!open_) throw Error("stream " + q->name() + ": waits for an event of a graph capture that has ended");
    if (std::find(members_.begin(), members_.end(), q) == members_.end()) {
      members_.push_back(q);
      joins = true;
    }
    nodes_.push_back(Node{q, "wait event", {}, {}, -1, slot, {}});
  }
  if (joins) q->set_capture(this);
}

bool CpuCapture::open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

// Which members' last ops reach the origin's end. Walking the waits, a wait on a queue known to
// reach the end from that point on carries the knowledge to the queue its event was recorded
// on, up to the record; repeated until nothing changes (a join may go through several streams).
std::string CpuCapture::unjoined_members() const {
  std::map<const CpuQueue*, long> reaches{{origin_, long(nodes_.size())}};  // last node known to reach the end
  auto known = [&](const CpuQueue* q) {
    auto it = reaches.find(q);
    return it == reaches.end() ? -1L : it->second;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const Node& n = nodes_[i];
      if (n.wait < 0 || long(i) > known(n.queue)) continue;
      const long r = long(recorded_at_.at(n.wait));
      if (known(nodes_[r].queue) < r) {
        reaches[nodes_[r].queue] = r;
        changed = true;
      }
    }
  }
  std::string out;
  for (const CpuQueue* q : members_) {
    long last = -1;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].queue == q) last = long(i);
    if (last > known(q)) out += (out.empty() ? "" : ", ") + q->name();
  }
  return out;
}

void CpuCapture::end() {
  std::vector<CpuQueue*> members;
  std::string unjoined;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!open_) throw Error("stream " + origin_->name() + ": a graph capture ended twice");
    open_ = false;
    members = members_;
    unjoined = unjoined_members();
  }
  for (CpuQueue* q : members) q->set_capture(nullptr);
  if (!unjoined.empty())
    throw Error("graph capture on stream " + origin_->name() + ": stream(s) " + unjoined +
                " joined the capture but their last work was not joined back into it (record an event there and make " +
                origin_->name() + " wait for it; on CUDA: cudaErrorStreamCaptureUnjoined)");
}

void CpuCapture::replay(CpuQueue* onto) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_) throw Error("stream " + origin_->name() + ": a graph replayed before its capture ended");
  for (const CpuQueue* q : members_)
    if ((q == origin_ ? onto : q)->capture())
      throw Error("stream " + (q == origin_ ? onto : q)->name() +
                  ": a graph replayed onto a stream that is being captured (replays are launched outside captures)");
  // Slot events, then one that starts the other members after `onto`'s earlier work.
  std::shared_ptr<ReplayEvent[]> events(new ReplayEvent[recorded_at_.size() + 1]);
  ReplayEvent* start = &events[recorded_at_.size()];
  onto->enqueue("event", [events, start] { start->raise(); });
  for (CpuQueue* q : members_)
    if (q != origin_) q->enqueue("wait event", [events, start] { start->wait(); });
  for (const Node& n : nodes_) {
    CpuQueue* q = n.queue == origin_ ? onto : n.queue;
    if (n.record >= 0)
      q->enqueue("event", [events, e = &events[n.record]] { e->raise(); });
    else if (n.wait >= 0)
      q->enqueue("wait event", [events, e = &events[n.wait]] { e->wait(); });
    else
      q->enqueue(n.name, n.op, n.details, n.on_issue);
  }
  // Every member was joined back into the origin at end(): `onto` already follows them all.
}

std::size_t CpuCapture::ops() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::size_t(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return bool(n.op); }));
}

}  // namespace moebench
