#include "harness/provenance.h"
#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include "comm/comm.h"

namespace moebench {

static std::string run_command(const std::string& cmd) {
  std::string out;
  if (std::FILE* p = ::popen(cmd.c_str(), "r")) {
    std::array<char, 256> buf{};
    while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// The source commit; "-dirty" when tracked sources (not results/, which runs rewrite) differ from it.
static std::string commit_from_git() {
#ifdef MOEBENCH_SOURCE_DIR
  const std::string git = std::string("git -C '") + MOEBENCH_SOURCE_DIR + "' ";
  const std::string hash = run_command(git + "rev-parse --short HEAD 2>/dev/null");
  if (!hash.empty()) {
    const std::string changes =
        run_command(git + "status --porcelain --untracked-files=no -- . ':(exclude)results' 2>/dev/null");
    return changes.empty() ? hash : hash + "-dirty";
  }
#endif
  return "unknown";
}

std::string source_commit() {
  if (const char* env = std::getenv("MOEBENCH_COMMIT"); env && *env) return env;
  // Asked of git once per process: the projections stamp hundreds of tables, and each question
  // costs two processes.
  static const std::string from_git = commit_from_git();
  return from_git;
}

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Provenance make_provenance(const Device& device, int ranks, const std::string& link, const std::string& dtype,
                           const std::string& scale) {
  Provenance p;
  p.backend = backend_name(device.backend());
  p.device = device.info().name;
  p.driver = device.info().driver;
  p.cuda = device.info().cuda;
#if MOEBENCH_WITH_CUDA
  p.nccl = device.backend() == Backend::cuda ? nccl_version() : "-";
#else
  p.nccl = "-";
#endif
  p.ranks = std::to_string(ranks);
  p.link = link;
  p.dtype = dtype;
  p.scale = scale;
  p.commit = source_commit();
  p.date = utc_now_iso8601();
  return p;
}

}  // namespace moebench
