#include "harness/spread.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

MedianInterval median_interval(std::vector<double> v) {
  const Spread s = spread_of(v);  // checks the samples
  std::sort(v.begin(), v.end());
  const int n = int(v.size());
  // P(Binomial(n, 1/2) <= j) for j = 0 .. n, by the recurrence C(n, j + 1) = C(n, j) (n - j) / (j + 1).
  std::vector<double> below(std::size_t(n) + 1);
  double term = std::ldexp(1.0, -n), sum = 0;
  for (int j = 0; j <= n; ++j) {
    sum += term;
    below[std::size_t(j)] = sum;
    term = term * double(n - j) / double(j + 1);
  }
  int k = 1;
  while (k + 1 <= (n + 1) / 2 && 1 - 2 * below[std::size_t(k)] >= 0.90) ++k;
  MedianInterval m;
  m.median = s.median;
  m.lo = v[std::size_t(k - 1)];
  m.hi = v[std::size_t(n - k)];
  m.coverage = 1 - 2 * below[std::size_t(k - 1)];
  m.samples = n;
  return m;
}

std::string repetitions_cell(const std::vector<double>& samples) {
  std::string out;
  char buf[32];
  for (double x : samples) {
    std::snprintf(buf, sizeof buf, "%.6g", x);
    out += (out.empty() ? "" : ";") + std::string(buf);
  }
  return out;
}

std::vector<double> parse_repetitions(const std::string& cell) {
  std::vector<double> v;
  std::size_t at = 0;
  while (at <= cell.size()) {
    const std::size_t end = std::min(cell.find(';', at), cell.size());
    const std::string item = cell.substr(at, end - at);
    char* stop = nullptr;
    const double x = std::strtod(item.c_str(), &stop);
    if (item.empty() || *stop != '\0' || !std::isfinite(x)) return {};
    v.push_back(x);
    at = end + 1;
  }
  return v.size() >= 2 ? v : std::vector<double>{};
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
