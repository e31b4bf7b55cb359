#include "harness/range_tree.h"
#include <algorithm>
#include <functional>
#include <map>
#include "kernels/exec.h"

namespace moebench {

namespace {
std::string parent_of(const std::string& path) {
  const auto cut = path.rfind('/');
  return cut == std::string::npos ? std::string() : path.substr(0, cut);
}
}  // namespace

std::vector<RangeRow> range_tree(const std::vector<std::vector<Breakdown::PathTotal>>& runs) {
  if (runs.empty() || runs.front().empty()) throw Error("range_tree: no runs, or a run recorded no range");
  const auto& first = runs.front();
  std::map<std::string, std::vector<double>> ms;  // per path, per run
  std::map<std::string, int> calls;
  for (const auto& t : first) calls[t.path] = t.calls;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    if (runs[r].size() != first.size())
      throw Error("range_tree: run " + std::to_string(r) + " recorded " + std::to_string(runs[r].size()) +
                  " paths, run 0 " + std::to_string(first.size()) + ": not the same work");
    for (const auto& t : runs[r]) {
      const auto c = calls.find(t.path);
      if (c == calls.end()) throw Error("range_tree: run " + std::to_string(r) + " has " + t.path + ", run 0 has not");
      if (c->second != t.calls)
        throw Error("range_tree: " + t.path + " ran " + std::to_string(t.calls) + " times in run " + std::to_string(r) +
                    ", " + std::to_string(c->second) + " in run 0");
      ms[t.path].push_back(t.ms);
    }
  }
  std::map<std::string, std::vector<std::string>> children;
  std::vector<std::string> roots;
  for (const auto& t : first) {
    const std::string up = parent_of(t.path);
    (calls.count(up) ? children[up] : roots).push_back(t.path);
  }
  std::vector<double> total(runs.size(), 0.0);
  for (const auto& root : roots)
    for (std::size_t r = 0; r < runs.size(); ++r) total[r] += ms[root][r];
  const double whole = spread_of(total).median;
  std::vector<RangeRow> out;
  auto row = [&](const std::string& path, const std::string& name, int depth, int n, const std::vector<double>& v,
                 bool other, bool leaf) {
    RangeRow x;
    x.path = path;
    x.name = name;
    x.depth = depth;
    x.calls = n;
    x.ms = spread_of(v);
    x.share = whole > 0 ? x.ms.median / whole : 0.0;
    x.other = other;
    x.leaf = leaf;
    out.push_back(std::move(x));
  };
  std::function<void(const std::string&, int)> visit = [&](const std::string& path, int depth) {
    const auto kids = children.find(path);
    const bool leaf = kids == children.end();
    row(path, path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1), depth, calls[path], ms[path],
        false, leaf);
    if (leaf) return;
    std::vector<double> rest = ms[path];
    for (const auto& kid : kids->second) {
      visit(kid, depth + 1);
      for (std::size_t r = 0; r < rest.size(); ++r) rest[r] -= ms[kid][r];
    }
    row(path + "/" + kOtherRange, kOtherRange, depth + 1, 0, rest, true, true);
  };
  for (const auto& root : roots) visit(root, 0);
  return out;
}

}  // namespace moebench
