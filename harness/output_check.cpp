#include "harness/output_check.h"
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <regex>
#include <unistd.h>

namespace moebench {
namespace fs = std::filesystem;

std::optional<std::string> check_output_folder(const std::string& option, const std::string& dir) {
  if (dir.empty()) return option + ": is an empty path; allowed: a file or folder path";
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(dir), ec);
  if (ec) return option + ": '" + dir + "': " + ec.message();
  // The nearest ancestor that exists must be a folder we can create files in.
  fs::path existing = p;
  while (!fs::exists(existing, ec)) {
    if (!existing.has_parent_path() || existing.parent_path() == existing) break;
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, ec))
    return option + ": '" + dir + "' cannot be created: " + existing.string() + " is not a folder";
  const fs::path probe = existing / (".moebench-probe." + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    return option + ": '" + dir + "' is not writable (" + existing.string() + ": " + std::strerror(errno) + ")";
  ::close(fd);
  ::unlink(probe.c_str());
  return std::nullopt;
}

std::optional<std::string> check_output_file(const std::string& option, const std::string& file) {
  if (file.empty()) return option + ": is an empty path; allowed: a file path";
  std::error_code ec;
  if (fs::is_directory(file, ec)) return option + ": '" + file + "' is a folder, not a file";
  const fs::path parent = fs::absolute(fs::path(file), ec).parent_path();
  return check_output_folder(option, parent.string());
}

int remove_stale_temporaries(const std::string& dir) {
  static const std::regex ours(R"(.+\.(csv|npy|json|png)\.tmp\.([0-9]+))");
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (!entry.is_regular_file(ec) || !std::regex_match(name, m, ours)) continue;
    const long pid = std::strtol(m[2].str().c_str(), nullptr, 10);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH && fs::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace moebench
