// MPMoE's adaptive pipeline granularity search (003 Sec. 4.1, Algorithm 1), for one memory
// reuse strategy. Two hypotheses keep it cheap: the best n grows with the batch B, so the Bs
// fall into disjoint ranges, one per n (G = {n: (B_floor, B_ceil)}, sorted by n); and the
// layer's time over n is parabola-like, so a search between two neighbouring ranges' n stops
// at the turning point. A B already asked for comes from the cache C; a B inside a known range
// takes that range's n without profiling; any other B profiles n from the range below it to
// the range above it, and the ranges grow to take it in (lines 19-23). G starts as
// {2: (0, 1), 8: (inf, inf)} (Algorithm 1, line 1; the text's {1: ...} would let n = 1 in,
// the box and "limited from 2 to 8" do not). The ranges and the cache can be saved and loaded,
// so a later run reuses the search rather than profiling again.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace moebench {

class GranularitySearch {
 public:
  // Milliseconds of the layer at the B being searched, with n parts.
  using Profile = std::function<double(int n)>;
  struct Range {
    double floor = 0, ceil = 0;
  };
  struct Stats {
    int queries = 0, cache_hits = 0, range_hits = 0, searches = 0, profiled_points = 0;
    double profile_ms = 0;  // the profiled points' own times, summed
  };
  // One row of the saved search: kind "range" (n, floor, ceil) or "cache" (b, n).
  struct Row {
    std::string kind;
    int n = 0;
    double floor = 0, ceil = 0;
    int b = 0;
  };

  GranularitySearch(int n_min = 2, int n_max = 8);
  // The best n for `tokens` (never more than `tokens`).
  int best(int tokens, const Profile& profile);
  // What the last search profiled (n -> ms), empty if the last query profiled nothing.
  const std::map<int, double>& last_profile() const { return last_profile_; }
  const std::map<int, Range>& ranges() const { return ranges_; }
  const std::map<int, int>& cache() const { return cache_; }
  const Stats& stats() const { return stats_; }

  std::vector<Row> rows() const;
  // Whether times over consecutive n are parabola-like, the hypothesis the early stop rests on:
  // they fall (or stay) to one bottom and rise (or stay) after it; either side may be empty.
  static bool parabola_like(const std::vector<double>& ms);
  // Replaces the ranges and the cache; an error names what is wrong with the rows.
  std::optional<std::string> load(const std::vector<Row>& rows);

 private:
  int search(int tokens, int lo, int hi, const Profile& profile);
  int n_min_, n_max_;
  std::map<int, Range> ranges_;  // G
  std::map<int, int> cache_;     // C
  std::map<int, double> last_profile_;
  Stats stats_;
};

}  // namespace moebench
