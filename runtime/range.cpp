#include "runtime/range.h"
#include <algorithm>
#include "runtime/timeline.h"
#if MOEBENCH_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace moebench {

#if MOEBENCH_WITH_NVTX
static nvtxDomainHandle_t domain() {
  static nvtxDomainHandle_t d = nvtxDomainCreateA("moebench");
  return d;
}
void nvtx_push(const char* name) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  nvtxDomainRangePushEx(domain(), &a);
}
void nvtx_pop() { nvtxDomainRangePop(domain()); }
#else
void nvtx_push(const char*) {}
void nvtx_pop() {}
#endif

void Breakdown::add(std::string name, std::shared_ptr<Event> start, std::shared_ptr<Event> stop, std::string path) {
  if (std::find(order_.begin(), order_.end(), name) == order_.end()) order_.push_back(name);
  if (path.empty()) path = name;
  if (std::find(path_order_.begin(), path_order_.end(), path) == path_order_.end()) path_order_.push_back(path);
  spans_.push_back(Span{std::move(name), std::move(path), std::move(start), std::move(stop)});
}

std::string Breakdown::open(std::string_view name) {
  std::string path = open_.empty() ? std::string(name) : open_.back() + "/" + std::string(name);
  if (std::find(path_order_.begin(), path_order_.end(), path) == path_order_.end()) path_order_.push_back(path);
  open_.push_back(path);
  return path;
}

void Breakdown::close() {
  if (!open_.empty()) open_.pop_back();  // clear() inside an open range emptied it already
}

std::vector<Breakdown::PathTotal> Breakdown::path_totals() const {
  std::vector<PathTotal> out;
  for (const auto& p : path_order_) out.push_back({p, 0.0, 0});
  for (const auto& s : spans_) {
    auto it = std::find_if(out.begin(), out.end(), [&](const PathTotal& t) { return t.path == s.path; });
    it->ms += Event::elapsed_ms(*s.start, *s.stop);
    ++it->calls;
  }
  return out;
}

std::map<std::string, double> Breakdown::totals_ms() const {
  std::map<std::string, double> out;
  for (const auto& n : order_) out[n] = 0.0;
  for (const auto& s : spans_) out[s.name] += Event::elapsed_ms(*s.start, *s.stop);
  return out;
}

double Breakdown::union_ms(const std::vector<std::string>& names) const {
  std::vector<std::pair<double, double>> spans;
  for (const auto& s : spans_)
    if (std::find(names.begin(), names.end(), s.name) != names.end())
      spans.emplace_back(s.start->time_us(), s.stop->time_us());
  std::sort(spans.begin(), spans.end());
  double total = 0, end = -1e300;
  for (const auto& [a, b] : spans) {
    if (b <= end) continue;
    total += b - std::max(a, end);
    end = b;
  }
  return total / 1e3;
}

void Breakdown::clear() {
  spans_.clear();
  order_.clear();
  path_order_.clear();
  open_.clear();
}

namespace {
thread_local std::vector<std::string> timed_paths;  // the open ranges' paths on this thread
}  // namespace

const std::string& current_range_path() {
  static const std::string none;
  return timed_paths.empty() ? none : timed_paths.back();
}

ScopedRange::ScopedRange(std::string_view name, const Stream& stream, Breakdown* breakdown)
    : name_(name), stream_(stream), breakdown_(breakdown) {
  nvtx_push(name_.c_str());
  // Inside a graph capture a range times nothing: its events would be points in the graph.
  if ((breakdown_ || Timeline::enabled()) && !stream.capturing()) {
    if (breakdown_) {
      path_ = breakdown_->open(name_);
      timed_paths.push_back(path_);
    }
    start_ = std::make_shared<Event>(stream.backend, EventUse::timing);
    stop_ = std::make_shared<Event>(stream.backend, EventUse::timing);
    start_->record(stream_);
  }
}

ScopedRange::~ScopedRange() {
  if (start_) {
    stop_->record(stream_);
    if (Timeline::enabled()) Timeline::record_range(stream_.id, name_, start_, stop_);
    if (breakdown_) {
      breakdown_->add(name_, start_, stop_, path_);
      breakdown_->close();
      if (!timed_paths.empty()) timed_paths.pop_back();
    }
  }
  nvtx_pop();
}

}  // namespace moebench
