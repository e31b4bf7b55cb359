#include "harness/spread.h"
#include <algorithm>
#include <cmath>
#include "kernels/exec.h"

namespace moebench {

// Linear interpolation between order statistics (numpy's default percentile).
static double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * double(sorted.size() - 1);
  const std::size_t lo = std::size_t(std::floor(pos)), hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
}

Spread spread_of(std::vector<double> v) {
  if (v.empty()) throw Error("spread_of: no samples");
  for (double x : v)
    if (!std::isfinite(x)) throw Error("a measurement came out " + std::string(std::isnan(x) ? "NaN" : "infinite"));
  std::sort(v.begin(), v.end());
  Spread s;
  s.samples = int(v.size());
  s.min = v.front();
  s.max = v.back();
  s.median = quantile(v, 0.5);
  s.q1 = quantile(v, 0.25);
  s.q3 = quantile(v, 0.75);
  return s;
}

Fastest fastest_of(const std::vector<Spread>& candidates) {
  if (candidates.empty()) throw Error("fastest_of: no candidates");
  Fastest f;
  double lowest_max = candidates[0].max;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].median < candidates[f.best].median) f.best = i;
    lowest_max = std::min(lowest_max, candidates[i].max);
  }
  bool any = false;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].min <= lowest_max) {
      if (!any) f.first = i;
      f.last = i;
      any = true;
    }
  return f;
}

}  // namespace moebench
