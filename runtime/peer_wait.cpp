#include "runtime/peer_wait.h"
#include <map>
#include <mutex>
#include <thread>

namespace moebench {
namespace {

struct HealthRegistry {
  std::mutex mutex;
  std::map<const void*, CommHealth> comms;
};
HealthRegistry& health_registry() {
  static HealthRegistry* r = new HealthRegistry;  // never destroyed: the watchdog may abort at exit
  return *r;
}

}  // namespace

void register_comm_health(const void* key, CommHealth health) {
  std::lock_guard<std::mutex> lock(health_registry().mutex);
  health_registry().comms[key] = std::move(health);
}

void unregister_comm_health(const void* key) {
  std::lock_guard<std::mutex> lock(health_registry().mutex);
  health_registry().comms.erase(key);
}

std::string comm_async_error() {
  std::lock_guard<std::mutex> lock(health_registry().mutex);
  for (auto& [key, health] : health_registry().comms)
    if (health.async_error)
      if (std::string e = health.async_error(); !e.empty()) return e;
  return {};
}

void abort_registered_comms() {
  std::map<const void*, CommHealth> comms;
  {
    // At most a second's tries: the watchdog must not wait forever behind a hung poll.
    std::unique_lock<std::mutex> lock(health_registry().mutex, std::defer_lock);
    for (int i = 0; i < 100 && !lock.try_lock(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!lock.owns_lock()) return;
    comms.swap(health_registry().comms);
  }
  std::function<void()> group_end;
  for (auto& [key, health] : comms)
    if (health.group_start && health.group_end) {
      health.group_start();
      group_end = health.group_end;
      break;
    }
  for (auto& [key, health] : comms)
    if (health.abort) health.abort();
  if (group_end) group_end();
}

}  // namespace moebench
