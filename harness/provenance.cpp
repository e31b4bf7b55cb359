#include "harness/provenance.h"
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include "comm/comm.h"
#include "harness/processors.h"

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

std::string agreed_or_mixed(const std::vector<std::string>& per_rank) {
  if (per_rank.empty()) return "-";
  if (std::all_of(per_rank.begin(), per_rank.end(), [&](const std::string& v) { return v == per_rank[0]; }))
    return per_rank[0];
  // Runs of equal values in rank order: "mixed: A (ranks 0-3), B (ranks 4-7)".
  std::string out = "mixed: ";
  for (std::size_t first = 0; first < per_rank.size();) {
    std::size_t last = first;
    while (last + 1 < per_rank.size() && per_rank[last + 1] == per_rank[first]) ++last;
    out += (first ? ", " : "") + per_rank[first] + " (rank" +
           (last > first ? "s " + std::to_string(first) + "-" + std::to_string(last) : " " + std::to_string(first)) + ")";
    first = last + 1;
  }
  return out;
}

std::string hosts_cell(const std::vector<std::string>& per_rank) {
  std::vector<std::string> seen;
  for (const std::string& h : per_rank)
    if (std::find(seen.begin(), seen.end(), h) == seen.end()) seen.push_back(h);
  std::string out;
  for (const std::string& h : seen) out += (out.empty() ? "" : " ") + h;
  return out.empty() ? "-" : out;
}

std::string link_over_nodes(const std::string& link, int nodes) {
  if (nodes <= 1 || link.rfind("measured: ", 0) != 0) return link;
  const char* cluster = std::getenv("MOEBENCH_NODE_LINK");
  const std::string flat = " between the ranks' hosts";  // the MPI communicator's own words
  const std::string what = link.size() > flat.size() && link.compare(link.size() - flat.size(), flat.size(), flat) == 0
                               ? link.substr(0, link.size() - flat.size())
                               : link;
  return what + " on " + std::to_string(nodes) + " nodes; " +
         (cluster && *cluster ? std::string(cluster) : "the cluster's own network between nodes, as measured");
}

Provenance make_provenance(const Runtime& rt, const Device& device, const std::string& link, const std::string& dtype,
                           const std::string& scale) {
  Provenance p;
  p.backend = backend_name(device.backend());
  p.device = agreed_or_mixed(rt.gather(device.info().name));
  p.driver = agreed_or_mixed(rt.gather(device.info().driver));
  p.nodes = std::to_string(rt.nodes());
  p.hosts = hosts_cell(rt.hosts());
  p.processors = processors_cell(rt, device.backend());
  p.cuda = device.info().cuda;
#if MOEBENCH_WITH_CUDA
  p.nccl = device.backend() == Backend::cuda ? nccl_version() : "-";
#else
  p.nccl = "-";
#endif
  p.ranks = std::to_string(rt.world());
  p.link = link_over_nodes(link, rt.nodes());
  p.dtype = dtype;
  p.scale = scale;
  p.commit = source_commit();
  p.date = utc_now_iso8601();
  return p;
}

}  // namespace moebench
