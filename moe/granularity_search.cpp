#include "moe/granularity_search.h"
#include <algorithm>
#include <cmath>
#include <limits>

namespace moebench {

GranularitySearch::GranularitySearch(int n_min, int n_max) : n_min_(n_min), n_max_(n_max) {
  const double inf = std::numeric_limits<double>::infinity();
  ranges_[n_min] = Range{0, 1};
  ranges_[n_max] = Range{inf, inf};
}

int GranularitySearch::search(int tokens, int lo, int hi, const Profile& profile) {
  ++stats_.searches;
  hi = std::min(hi, tokens);
  lo = std::min(lo, hi);
  int best = lo;
  double best_ms = 0, previous = 0;
  for (int n = lo; n <= hi; ++n) {
    const double ms = profile(n);
    ++stats_.profiled_points;
    stats_.profile_ms += ms;
    last_profile_[n] = ms;
    if (n == lo || ms < best_ms) {
      best = n;
      best_ms = ms;
    }
    if (n > lo && ms > previous) break;  // past the bottom of the parabola
    previous = ms;
  }
  return best;
}

int GranularitySearch::best(int tokens, const Profile& profile) {
  ++stats_.queries;
  last_profile_.clear();
  if (auto it = cache_.find(tokens); it != cache_.end()) {  // lines 3-5
    ++stats_.cache_hits;
    return it->second;
  }
  const double B = tokens;
  // Line 6: the range holding B, or the neighbouring ranges below and above it.
  int below = ranges_.begin()->first, above = ranges_.rbegin()->first, n = 0;
  bool inside = false;
  for (const auto& [ni, r] : ranges_) {
    if (B >= r.floor && B <= r.ceil) {
      n = ni;
      inside = true;
      break;
    }
    if (r.ceil < B) below = ni;
  }
  if (inside) {
    ++stats_.range_hits;
  } else {
    auto up = ranges_.upper_bound(below);
    above = up == ranges_.end() ? std::max(below, n_max_) : up->first;
    if (B < ranges_.begin()->second.floor) above = below = ranges_.begin()->first;
    n = search(tokens, below, above, profile);  // lines 7-18
    // Lines 19-23: a new range for a new n, or the neighbour's range grows to take B in.
    if (n != below && n != above) {
      ranges_[n] = Range{B, B};
    } else {
      Range& r = ranges_[n];
      r.floor = std::min(B, r.floor);
      r.ceil = std::max(B, r.ceil);
    }
  }
  cache_[tokens] = n;  // line 24
  return n;
}

bool GranularitySearch::parabola_like(const std::vector<double>& ms) {
  std::size_t i = 1;
  while (i < ms.size() && ms[i] <= ms[i - 1]) ++i;
  while (i < ms.size() && ms[i] >= ms[i - 1]) ++i;
  return i >= ms.size();
}

std::vector<GranularitySearch::Row> GranularitySearch::rows() const {
  std::vector<Row> out;
  for (const auto& [n, r] : ranges_) out.push_back(Row{"range", n, r.floor, r.ceil, 0});
  for (const auto& [b, n] : cache_) out.push_back(Row{"cache", n, 0, 0, b});
  return out;
}

std::optional<std::string> GranularitySearch::load(const std::vector<Row>& rows) {
  std::map<int, Range> ranges;
  std::map<int, int> cache;
  for (const Row& r : rows) {
    if (r.n < 1) return "a saved search names n = " + std::to_string(r.n) + " (must be >= 1)";
    if (r.kind == "range") {
      if (!(r.floor <= r.ceil)) return "a saved range of n = " + std::to_string(r.n) + " has floor above ceiling";
      ranges[r.n] = Range{r.floor, r.ceil};
    } else if (r.kind == "cache") {
      if (r.b < 1) return "a saved cache entry has B = " + std::to_string(r.b) + " (must be >= 1)";
      cache[r.b] = r.n;
    } else {
      return "a saved search row of kind '" + r.kind + "' (allowed: range, cache)";
    }
  }
  if (ranges.empty()) return "a saved search without ranges";
  ranges_ = std::move(ranges);
  cache_ = std::move(cache);
  return std::nullopt;
}

}  // namespace moebench
