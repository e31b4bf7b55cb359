// The device on the CPU: its name and memory. Its streams are CpuQueues (runtime/cpu_queue.h).
#include <fstream>
#include <unistd.h>
#include "runtime/device.h"

namespace moebench {

namespace detail {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "cpu";
}

void host_memory(std::size_t* free_bytes, std::size_t* total_bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  *free_bytes = static_cast<std::size_t>(sysconf(_SC_AVPHYS_PAGES)) * page;
  *total_bytes = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page;
  // MemAvailable counts reclaimable page cache, which sysconf's free pages do not.
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::size_t kb;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") { *free_bytes = kb * 1024; break; }
  }
}

}  // namespace detail

void Device::open_cpu() {
  info_.name = detail::cpu_model();
  info_.driver.assign(1, '-');  // assign, not = "-": GCC 12 warns a false overlap (-Wrestrict) on that
  info_.cuda.assign(1, '-');
  detail::host_memory(&info_.free_bytes, &info_.total_bytes);
}

}  // namespace moebench
