#include "comm/nccl_order.h"
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include "kernels/exec.h"
#include "runtime/watchdog.h"

namespace moebench {
namespace {

NcclOrderSettings read_settings() {
  NcclOrderSettings s;
  if (const char* on = std::getenv("MOEBENCH_MPI_AS_NCCL"); on && *on) {
    const std::string v = on;
    if (v != "0" && v != "1") throw Error("MOEBENCH_MPI_AS_NCCL: '" + v + "' is not allowed; use 0 (MPI's own order) or 1 (NCCL's)");
    s.on = v == "1";
  }
  if (const char* eager = std::getenv("MOEBENCH_MPI_AS_NCCL_EAGER_BYTES"); eager && *eager) {
    const std::string v = eager;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.find_first_not_of("0123456789") != std::string::npos || *end || n > (1ull << 30))
      throw Error("MOEBENCH_MPI_AS_NCCL_EAGER_BYTES: '" + v + "' is not a byte count in [0, 1073741824]");
    s.eager_bytes = std::size_t(n);
  }
  return s;
}

// The watchdog keeps the operation's name by pointer: each wait's name is kept for the process.
const char* interned(const std::string& text) {
  static std::mutex mutex;
  static std::set<std::string>* names = new std::set<std::string>;  // never destroyed: the watchdog may read it at exit
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(text).first->c_str();
}

struct OrderRegistry {
  std::mutex mutex;
  std::vector<std::shared_ptr<IssueOrder>> orders;  // kept after their communicators, until forgotten
};
OrderRegistry& order_registry() {
  static OrderRegistry* r = new OrderRegistry;
  return *r;
}

// Which communicators each stream issued operations of, by the stream's id.
struct StreamUse {
  std::string name;
  std::vector<std::string> communicators;  // their labels, in the order of first use
};
struct StreamRecord {
  std::mutex mutex;
  std::map<int, StreamUse> streams;
};
StreamRecord& stream_record() {
  static StreamRecord* r = new StreamRecord;
  return *r;
}

}  // namespace

const NcclOrderSettings& nccl_order_settings() {
  static const NcclOrderSettings s = read_settings();
  return s;
}

IssueOrder::IssueOrder(std::string label) : label_(std::move(label)) {}

std::uint64_t IssueOrder::issue() {
  std::lock_guard<std::mutex> lock(mutex_);
  return issued_++;
}

void IssueOrder::wait_turn(std::uint64_t ticket, const char* operation) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (completed_ >= ticket) return;
  Watchdog::Scope watch(interned(std::string(operation) + " on " + label_ +
                                 ", waiting for the operations issued before it on that communicator (NCCL's order)"));
  turn_.wait(lock, [&] { return completed_ >= ticket; });
}

void IssueOrder::done(std::uint64_t ticket) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = std::max(completed_, ticket + 1);
  }
  turn_.notify_all();
}

void IssueOrder::note_stream(int stream_id, const std::string& stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) streams_.push_back(stream);
  }
  // The CPU ranks' default stream runs each operation before the host goes on: nothing queues there.
  if (stream_id == 0) return;
  StreamRecord& record = stream_record();
  std::lock_guard<std::mutex> lock(record.mutex);
  StreamUse& use = record.streams[stream_id];
  use.name = stream;
  if (std::find(use.communicators.begin(), use.communicators.end(), label_) == use.communicators.end())
    use.communicators.push_back(label_);
}

void IssueOrder::forget_streams() {
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.clear();
}

std::vector<std::string> IssueOrder::streams() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return streams_;
}

const char* IssueOrder::connect_wait_name(int to, int from) const {
  std::string what = "the first ";
  if (to >= 0) what += "send to rank " + std::to_string(to);
  if (to >= 0 && from >= 0) what += " and ";
  if (from >= 0) what += "receive from rank " + std::to_string(from);
  return interned(what + " on " + label_ + ", connecting: NCCL connects a pair of ranks at its first use, once both "
                  "have issued their side (an ungrouped ring of sends then receives stops here)");
}

void IssuedTickets::push(std::uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  tickets_.push_back(ticket);
}

std::uint64_t IssuedTickets::pop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (tickets_.empty()) throw Error("a communicator's operation ran without being issued (NCCL order)");
  const std::uint64_t t = tickets_.front();
  tickets_.pop_front();
  return t;
}

void register_issue_order(const std::shared_ptr<IssueOrder>& order) {
  std::lock_guard<std::mutex> lock(order_registry().mutex);
  order_registry().orders.push_back(order);
}

std::vector<std::string> communicators_on_several_streams() {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(order_registry().mutex);
  for (const auto& order : order_registry().orders) {
    auto streams = order->streams();
    if (streams.size() < 2) continue;
    std::sort(streams.begin(), streams.end());
    std::string line = order->label() + ":";
    for (std::size_t i = 0; i < streams.size(); ++i) line += (i ? ", " : " ") + streams[i];
    out.push_back(line);
  }
  return out;
}

std::vector<std::string> streams_with_several_communicators() {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(stream_record().mutex);
  for (const auto& [id, use] : stream_record().streams) {
    if (use.communicators.size() < 2) continue;
    std::string line = use.name + ":";
    for (std::size_t i = 0; i < use.communicators.size(); ++i) line += (i ? "; " : " ") + use.communicators[i];
    out.push_back(line);
  }
  return out;
}

void forget_communicator_streams() {
  {
    std::lock_guard<std::mutex> lock(stream_record().mutex);
    stream_record().streams.clear();
  }
  std::lock_guard<std::mutex> lock(order_registry().mutex);
  auto& orders = order_registry().orders;
  for (const auto& order : orders) order->forget_streams();
  orders.erase(std::remove_if(orders.begin(), orders.end(), [](const auto& o) { return o.use_count() == 1; }), orders.end());
}

}  // namespace moebench
