// A figure measured several times: its median and its spread (min, max, quartiles), so one
// noisy repetition on a shared machine never stands as the result.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace moebench {

struct Spread {
  double median = 0, min = 0, max = 0, q1 = 0, q3 = 0;
  int samples = 0;
  // (max - min) / median: how far apart the repetitions landed.
  double relative_range() const { return median != 0 ? (max - min) / median : 0.0; }
};

// Throws Error on no samples or a non-finite sample (a NaN is a failed measurement, not a value).
Spread spread_of(std::vector<double> samples);

// The median of paired repetitions (a ratio taken per repetition, say) and a distribution-free
// confidence interval of it: the order statistics x(k) and x(n+1-k) for the largest k whose
// coverage, 1 - 2 P(Binomial(n, 1/2) <= k - 1), is at least 90% (k = 1 below 5 samples, where
// no interval reaches 90%: min..max, with its lower coverage). Throws Error as spread_of does.
struct MedianInterval {
  double median = 0, lo = 0, hi = 0;
  double coverage = 0;  // of [lo, hi]
  int samples = 0;
};
MedianInterval median_interval(std::vector<double> samples);

// Repetitions as a CSV cell, in the order they ran ("1.25;1.31;1.2"), and back (nothing where
// the cell holds fewer than two numbers).
std::string repetitions_cell(const std::vector<double>& samples);
std::vector<double> parse_repetitions(const std::string& cell);

// Which of several candidates, each a time measured several times, was fastest: `best`, the
// lowest median (the first of equals), and [first, last], the lowest and highest index of those
// the spread alone could have made fastest -- every candidate whose fastest run beat the slowest
// run of each. `best` always lies within. Throws Error on no candidates.
struct Fastest {
  std::size_t best = 0, first = 0, last = 0;
};
Fastest fastest_of(const std::vector<Spread>& candidates);

}  // namespace moebench
