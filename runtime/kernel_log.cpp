#include "runtime/kernel_log.h"
#include <cxxabi.h>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include "runtime/op_hooks.h"
#include "runtime/range.h"

namespace moebench {

namespace {
std::atomic<bool> logging{false};
std::atomic<int> logged_run{0};
Backend logged_backend = Backend::cpu;
std::mutex records_mutex;
std::vector<KernelRecord> cpu_records;
std::vector<HostCallRecord> last_host_calls;

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

thread_local int poisoning_scopes = 0;

// An op the CPU's default stream runs at once, under the calling thread's range.
void log_inline_op(const char* name, const std::function<void()>& op) {
  const int run = KernelLog::current_run();
  if (poisoning_scopes || run == KernelLog::kNoRun) return op();
  const double start = now_us();
  op();
  KernelLog::record_cpu(name, current_range_path(), run, start, now_us());
}
}  // namespace

std::string KernelLog::start(Backend backend) {
  if (logging) throw Error("KernelLog: started twice");
  {
    std::lock_guard<std::mutex> lock(records_mutex);
    cpu_records.clear();
  }
  logged_run = 0;
  last_host_calls.clear();
  if (backend == Backend::cuda) {
    if (std::string why = cupti_log_start(); !why.empty()) return why;
    op_hooks::set_device_ops_logged(true);
  }
  logged_backend = backend;
  logging = true;
  if (backend == Backend::cpu) op_hooks::set_inline_op_logger(&log_inline_op);
  return "";
}

std::vector<KernelRecord> KernelLog::stop() {
  if (!logging) return {};
  logging = false;
  op_hooks::set_inline_op_logger(nullptr);
  op_hooks::set_device_ops_logged(false);
  if (logged_backend == Backend::cuda) return cupti_log_stop(&last_host_calls);
  std::lock_guard<std::mutex> lock(records_mutex);
  return std::move(cpu_records);
}

std::vector<HostCallRecord> KernelLog::host_calls() { return last_host_calls; }

bool KernelLog::on() { return logging.load(std::memory_order_relaxed); }

void KernelLog::set_run(int run) { logged_run.store(run < 0 ? kNoRun : run, std::memory_order_relaxed); }

int KernelLog::current_run() { return logged_run.load(std::memory_order_relaxed); }

void KernelLog::record_cpu(const char* name, std::string path, int run, double start_us, double end_us) {
  // A stream's event and its wait on another stream's event order the work; they compute nothing.
  if (!std::strcmp(name, "event") || !std::strcmp(name, "wait event")) return;
  std::lock_guard<std::mutex> lock(records_mutex);
  cpu_records.push_back(KernelRecord{name, std::move(path), (end_us - start_us) / 1e3, start_us / 1e3, run});
}

std::string readable_kernel_name(const char* mangled) {
  int status = 1;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  // The parameter list: the parenthesis closing the name and the one it matches.
  if (!name.empty() && name.back() == ')') {
    int depth = 0;
    for (std::size_t i = name.size(); i-- > 0;) {
      if (name[i] == ')') ++depth;
      if (name[i] == '(' && --depth == 0) {
        name.erase(i);
        break;
      }
    }
  }
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);
  for (std::size_t at; (at = name.find("(anonymous namespace)::")) != std::string::npos;) name.erase(at, 23);
  return name;
}

std::string api_function_name(const char* name) {
  std::string out = name ? name : "";
  const std::size_t v = out.rfind("_v");
  if (v != std::string::npos && v + 2 < out.size() &&
      out.find_first_not_of("0123456789", v + 2) == std::string::npos)
    out.erase(v);
  return out;
}

PoolPoisoning::PoolPoisoning() { ++poisoning_scopes; }
PoolPoisoning::~PoolPoisoning() { --poisoning_scopes; }
bool PoolPoisoning::on_this_thread() { return poisoning_scopes > 0; }

}  // namespace moebench
