#include "harness/range_roofline.h"
#include "harness/csv.h"

namespace moebench {

std::map<std::string, CountedRange> count_range_work(const std::vector<RangeRow>& rows,
                                                     const std::map<std::string, Work>& phase_work,
                                                     const RooflineProfile& profile, bool half_precision) {
  std::map<std::string, CountedRange> counted;  // per path; children come after their parent: go backwards
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
    if (it->other) continue;
    if (auto w = phase_work.find(it->name); w != phase_work.end()) {
      CountedRange c{w->second, 0, ""};
      if (profile.hw) {
        const Roofline r = roofline(w->second, *profile.hw, half_precision, profile.rate_scale, it->ms.median);
        c.floor_ms = r.floor_ms;
        c.bound = r.bound;
      }
      counted[it->path] = c;
      continue;
    }
    CountedRange sum{{}, 0, "sum of its phases'"};
    bool any = false;
    for (const auto& [path, c] : counted)
      if (path.size() > it->path.size() && path.compare(0, it->path.size() + 1, it->path + "/") == 0 &&
          path.find('/', it->path.size() + 1) == std::string::npos) {
        sum.work.flops += c.work.flops;
        sum.work.bytes += c.work.bytes;
        sum.floor_ms += c.floor_ms;
        any = true;
      }
    if (any) counted[it->path] = sum;
  }
  return counted;
}

std::vector<std::string> range_work_cells(const RangeRow& r, const std::map<std::string, CountedRange>& counted,
                                          const RooflineProfile& profile) {
  const auto c = counted.find(r.path);
  if (c == counted.end())
    return std::vector<std::string>(6, r.other ? "n/a (unattributed)" : "n/a (not counted: no work of the paper's computation)");
  const double ms = r.ms.median;
  std::vector<std::string> work = {
      fmt(c->second.work.flops), ms > 0 ? fmt(c->second.work.flops / (ms * 1e-3) / 1e12, 4) : "n/a (no time)",
      fmt(c->second.work.bytes), fmt(c->second.floor_ms, 5), c->second.bound,
      ms > 0 && c->second.floor_ms > 0 ? fmt(ms / c->second.floor_ms, 4) : "n/a (no time)"};
  if (!profile.hw) work[3] = work[4] = work[5] = "n/a (no profile of this device: --roofline-profile)";
  return work;
}

}  // namespace moebench
