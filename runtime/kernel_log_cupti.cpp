// The kernel log on CUDA: CUPTI's activity records of every kernel, copy and memset, each joined
// through its correlation id to the range path of the API call that launched it (a callback on
// the runtime's and the driver's API records the path when the call enters; cuBLAS and cuDNN
// launch through the driver). The same callback times each thread's outermost API call, entry
// to return, on CUPTI's clock, and sums those per run, path and function: the host's side of a
// gap between launches. libcupti is opened with dlopen, never linked: the binaries start where
// it is missing.
#include "runtime/kernel_log.h"
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include "runtime/range.h"
#if MOEBENCH_WITH_CUDA && MOEBENCH_WITH_CUPTI
#include <cupti.h>
#include <dlfcn.h>
#if CUPTI_API_VERSION >= 130000  // the record layouts read below (CUpti_ActivityKernel10)
#define MOEBENCH_KERNEL_LOG_CUPTI 1
#endif
#endif

namespace moebench {

#if MOEBENCH_KERNEL_LOG_CUPTI

namespace {
constexpr std::size_t kBufferBytes = 8u << 20;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};
constexpr CUpti_CallbackDomain kDomains[] = {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API};

struct Cupti {
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiEnableDomain) enable_domain = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  CUpti_SubscriberHandle subscriber = nullptr;
  bool subscribed = false;
  std::string failure;  // why there is no log, once that is known for good

  std::string why(const char* call, CUptiResult r) const {
    const char* text = nullptr;
    if (result_string) result_string(r, &text);
    return std::string("CUPTI: ") + call + " failed: " + (text ? text : std::to_string(int(r)));
  }
};

template <class Fn>
bool load(void* lib, Fn& fn, const char* name, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn && missing.empty()) missing = name;
  return fn != nullptr;
}

Cupti& cupti() {
  static Cupti c = [] {
    Cupti c;
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("MOEBENCH_CUPTI_LIBRARY"); env && *env) candidates.push_back(env);
    if (*MOEBENCH_CUPTI_LIBRARY) candidates.push_back(MOEBENCH_CUPTI_LIBRARY);  // the build's toolkit's
    candidates.push_back("libcupti.so");
    candidates.push_back("libcupti.so." + std::to_string(CUPTI_API_VERSION / 10000));
    void* lib = nullptr;
    for (const auto& path : candidates)
      if ((lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      c.failure = "CUPTI: libcupti was not found (MOEBENCH_CUPTI_LIBRARY names it)";
      return c;
    }
    std::string missing;
    load(lib, c.register_callbacks, "cuptiActivityRegisterCallbacks", missing);
    load(lib, c.enable, "cuptiActivityEnable", missing);
    load(lib, c.disable, "cuptiActivityDisable", missing);
    load(lib, c.flush_all, "cuptiActivityFlushAll", missing);
    load(lib, c.next_record, "cuptiActivityGetNextRecord", missing);
    load(lib, c.subscribe, "cuptiSubscribe", missing);
    load(lib, c.enable_domain, "cuptiEnableDomain", missing);
    load(lib, c.result_string, "cuptiGetResultString", missing);
    load(lib, c.timestamp, "cuptiGetTimestamp", missing);
    if (!missing.empty()) c.failure = "CUPTI: the loaded libcupti has no " + missing;
    return c;
  }();
  return c;
}

// What the callbacks gather: CUPTI's buffers are handed back on its own thread.
struct Raw {
  std::string name;
  std::uint32_t correlation = 0;
  std::uint64_t start = 0, end = 0;  // ns
};
std::mutex state_mutex;
std::vector<Raw> raw;
// Where an API call was made: its range path and run. A record whose call has none was made
// outside the log's runs (KernelLog::set_run) or before the log began, and is left out.
struct CallSite {
  std::string path;
  int run = 0;
};
std::unordered_map<std::uint32_t, CallSite> call_site;  // by correlation id
// The path of a call the pool's poisoning made (PoolPoisoning): no range is named so.
const std::string kPoolPoisoning = "\x01pool poisoning";
std::unordered_map<const char*, std::string> readable_names;  // CUPTI shares one name per kernel

// The host's API calls, per (run, path, function): CUPTI's function names are global constants.
struct HostSum {
  int calls = 0;
  std::uint64_t ns = 0;
};
std::map<std::tuple<int, std::string, const char*>, HostSum> host_sums;
// A thread's open API calls: the depth of its nesting (a runtime call's driver calls), and the
// outermost one's function, path, run and entry, null where it is not summed (made outside the
// log's runs, or by the pool's poisoning). `epoch` names the log the depth was counted in: a call
// the previous log saw enter but not return leaves its thread's depth behind.
struct OpenCall {
  const char* function = nullptr;
  std::string path;
  int run = 0;
  std::uint64_t entered = 0;
};
thread_local int api_depth = 0;
thread_local std::uint64_t api_epoch = 0;
thread_local OpenCall open_call;
std::atomic<std::uint64_t> log_epoch{0};

const char* copy_kind(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
  }
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));  // null: CUPTI drops records
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
  const Cupti& c = cupti();
  CUpti_Activity* record = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_mutex);
    while (buffer && c.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        auto name = readable_names.find(k->name);
        if (name == readable_names.end()) name = readable_names.emplace(k->name, readable_kernel_name(k->name)).first;
        raw.push_back(Raw{name->second, k->correlationId, k->start, k->end});
      } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        raw.push_back(Raw{copy_kind(m->copyKind), m->correlationId, m->start, m->end});
      } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        raw.push_back(Raw{"memset", m->correlationId, m->start, m->end});
      }
    }
  }
  std::free(buffer);
}

// Every runtime and driver API call: as it enters, the range it is made in; as the outermost
// returns, its time on the host.
void CUPTIAPI on_api_call(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  const Cupti& c = cupti();
  if (const std::uint64_t epoch = log_epoch.load(std::memory_order_relaxed); api_epoch != epoch) {
    api_epoch = epoch;
    api_depth = 0;
  }
  if (call->callbackSite == CUPTI_API_EXIT) {
    if (api_depth == 0 || --api_depth > 0 || !open_call.function) return;  // entered before the log began; inner
    std::uint64_t now = 0;
    c.timestamp(&now);  // before the sum, which is not the call's time
    std::lock_guard<std::mutex> lock(state_mutex);
    HostSum& sum = host_sums[{open_call.run, open_call.path, open_call.function}];
    ++sum.calls;
    sum.ns += now > open_call.entered ? now - open_call.entered : 0;
    return;
  }
  if (call->callbackSite != CUPTI_API_ENTER) return;
  const bool outermost = api_depth++ == 0;
  if (outermost) open_call.function = nullptr;
  const int run = KernelLog::current_run();
  if (run == KernelLog::kNoRun) return;
  const std::string& path = PoolPoisoning::on_this_thread() ? kPoolPoisoning : current_range_path();
  {
    std::lock_guard<std::mutex> lock(state_mutex);
    call_site[call->correlationId] = CallSite{path, run};
  }
  if (!outermost || PoolPoisoning::on_this_thread()) return;
  open_call.function = call->functionName;
  open_call.path = path;
  open_call.run = run;
  c.timestamp(&open_call.entered);  // last, so that the bookkeeping above is not in the call's time
}

void switch_off(const Cupti& c) {
  for (CUpti_ActivityKind kind : kKinds) c.disable(kind);
  if (c.subscribed)
    for (CUpti_CallbackDomain domain : kDomains) c.enable_domain(0, c.subscriber, domain);
}
}  // namespace

std::string cupti_log_start() {
  Cupti& c = cupti();
  if (!c.failure.empty()) return c.failure;
  {
    std::lock_guard<std::mutex> lock(state_mutex);
    raw.clear();
    call_site.clear();
    host_sums.clear();
  }
  log_epoch.fetch_add(1, std::memory_order_relaxed);
  if (!c.subscribed) {  // once per process: CUPTI takes one subscriber
    if (CUptiResult r = c.register_callbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS)
      return c.failure = c.why("cuptiActivityRegisterCallbacks", r);
    if (CUptiResult r = c.subscribe(&c.subscriber, on_api_call, nullptr); r != CUPTI_SUCCESS)
      return c.failure = c.why("cuptiSubscribe (is another profiler attached?)", r);
    c.subscribed = true;
  }
  for (CUpti_CallbackDomain domain : kDomains)
    if (CUptiResult r = c.enable_domain(1, c.subscriber, domain); r != CUPTI_SUCCESS) {
      switch_off(c);
      return c.why("cuptiEnableDomain", r);
    }
  for (CUpti_ActivityKind kind : kKinds)
    if (CUptiResult r = c.enable(kind); r != CUPTI_SUCCESS) {
      switch_off(c);
      return c.why("cuptiActivityEnable", r);
    }
  return "";
}

std::vector<KernelRecord> cupti_log_stop(std::vector<HostCallRecord>* host_calls) {
  const Cupti& c = cupti();
  switch_off(c);
  c.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // the buffers' records, through buffer_completed
  std::lock_guard<std::mutex> lock(state_mutex);
  std::vector<KernelRecord> out;
  out.reserve(raw.size());
  // CUPTI gives 0 for a timestamp it could not take: such a record's time and start are untold.
  auto timed = [](const Raw& r) { return r.start != 0 && r.end >= r.start; };
  std::uint64_t origin = ~std::uint64_t(0);  // ns since an epoch: too fine for a double
  for (const Raw& r : raw)
    if (timed(r)) origin = std::min(origin, r.start);
  for (const Raw& r : raw) {
    const auto site = call_site.find(r.correlation);
    if (site == call_site.end() || site->second.path == kPoolPoisoning) continue;
    out.push_back(KernelRecord{r.name, site->second.path, timed(r) ? double(r.end - r.start) / 1e6 : 0.0,
                               timed(r) ? double(r.start - origin) / 1e6 : -1.0, site->second.run});
  }
  raw.clear();
  call_site.clear();
  if (host_calls) {
    host_calls->clear();
    for (const auto& [key, sum] : host_sums)
      host_calls->push_back(HostCallRecord{api_function_name(std::get<2>(key)), std::get<1>(key), std::get<0>(key),
                                           sum.calls, double(sum.ns) / 1e6});
  }
  host_sums.clear();
  return out;
}

#else

std::string cupti_log_start() {
#if !MOEBENCH_WITH_CUDA
  return "built without CUDA";
#else
  return "built without CUPTI (its headers were not found, or are older than CUDA 13's)";
#endif
}
std::vector<KernelRecord> cupti_log_stop(std::vector<HostCallRecord>* host_calls) {
  if (host_calls) host_calls->clear();
  return {};
}

#endif

}  // namespace moebench
