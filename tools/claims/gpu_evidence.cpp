#include "tools/claims/gpu_evidence.h"
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <regex>
#include <sstream>
#include "kernels/exec.h"
#include "harness/csv.h"

namespace moebench {

const std::vector<std::string>& measured_code_folders() {
  // The code a bench runs (models/ included: the benches build on its step models), the scripts
  // that choose its sizes, link and repetitions (experiments/, less the papers' numbers and the
  // report), and how it is built (the presets, the top-level CMakeLists.txt and cmake/).
  static const std::vector<std::string> folders = {
      "kernels", "runtime", "comm", "moe", "pipeline", "gpt", "harness", "bench", "models", "experiments",
      "cmake", "CMakePresets.json", "CMakeLists.txt", ":(exclude)experiments/reference", ":(exclude)experiments/claims"};
  return folders;
}

namespace {

// Seconds since the epoch of "YYYY-MM-DDTHH:MM:SSZ", or nothing.
std::optional<double> utc_seconds(const std::string& iso) {
  std::tm t{};
  if (std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour, &t.tm_min, &t.tm_sec) != 6)
    return std::nullopt;
  t.tm_year -= 1900;
  t.tm_mon -= 1;
  return double(timegm(&t));
}

// A command's standard output and whether it exited 0.
std::pair<std::string, bool> run(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>/dev/null").c_str(), "r");
  if (!p) return {"", false};
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  return {out, pclose(p) == 0};
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::optional<std::string> check(const std::string& repo, const RunOrigin& gpu, const RunOrigin& local) {
  static const std::regex commit_id("[0-9a-f]{7,40}");
  if (gpu.commit.size() > 6 && gpu.commit.compare(gpu.commit.size() - 6, 6, "-dirty") == 0)
    return "the GPU run is of an uncommitted tree (" + gpu.commit + "), so its code cannot be named";
  if (!std::regex_match(gpu.commit, commit_id)) return "the GPU run names no commit ('" + gpu.commit + "')";
  const auto g = utc_seconds(gpu.date), l = utc_seconds(local.date);
  if (!g || !l) return "the GPU run's date '" + gpu.date + "' or this machine's '" + local.date + "' is not a UTC timestamp";
  const double days = std::fabs(*l - *g) / 86400;
  if (days > kMaxEvidenceDays)
    return "the GPU run (" + gpu.date.substr(0, 10) + ") and this machine's runs (" + local.date.substr(0, 10) + ") are " +
           fmt(days, 3) + " days apart, more than " + std::to_string(kMaxEvidenceDays);
  if (!std::regex_match(local.commit, commit_id))
    return "this machine's runs name no commit ('" + local.commit + "') to compare the GPU run's " + gpu.commit + " with";
  const std::string git = "git -C " + quoted(repo);
  for (const std::string& c : {gpu.commit, local.commit})
    if (!run(git + " cat-file -e " + c + "^{commit}").second)
      return "commit " + c + " is not in this checkout's history, so whether the code changed since cannot be told";
  std::string paths;
  for (const std::string& f : measured_code_folders()) paths += " " + quoted(f);
  const auto [changed, ok] = run(git + " diff --name-only " + gpu.commit + " " + local.commit + " --" + paths);
  if (!ok) return "git could not compare " + gpu.commit + " with " + local.commit;
  std::map<std::string, int> per_folder;
  std::istringstream lines(changed);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) ++per_folder[line.find('/') == std::string::npos ? line : line.substr(0, line.find('/')) + "/"];
  if (per_folder.empty()) return std::nullopt;
  std::string which;
  for (const auto& [folder, n] : per_folder)
    which += (which.empty() ? "" : ", ") + folder + " (" + std::to_string(n) + " file" + (n == 1 ? "" : "s") + ")";
  return "the measured code changed between the GPU run's " + gpu.commit + " and this machine's " + local.commit + ": " + which;
}

}  // namespace

std::optional<std::string> stale_gpu_evidence(const std::string& repo, const RunOrigin& gpu, const RunOrigin& local) {
  static std::map<std::string, std::optional<std::string>> cache;
  const std::string key = repo + "|" + gpu.commit + "|" + gpu.date + "|" + local.commit + "|" + local.date;
  const auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  return cache[key] = check(repo, gpu, local);
}

}  // namespace moebench
