#include "tools/claims/verdict.h"
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include "harness/csv.h"
#include "kernels/exec.h"
#include "tools/claims/ledger.h"

namespace moebench {
namespace {

// How many times one value is the other, either way (infinite across 0).
double ratio_factor(double v, double paper) {
  if (v == paper) return 1;
  if (v == 0 || paper == 0 || (v > 0) != (paper > 0)) return INFINITY;
  return std::max(v / paper, paper / v);
}

std::string shown(double v) { return fmt(v, 3); }
std::string shown_range(const Number& n) {
  return n.lo == n.hi ? shown(n.v) : shown(n.v) + " [" + shown(n.lo) + ", " + shown(n.hi) + "]";
}
double tolerance_of(const std::string& judge, const std::string& cls) {
  const std::string value = judge.substr(cls.size() + 1);
  char* end = nullptr;
  const double t = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(t >= 0)) throw Error("claims.csv: judge '" + judge + "': no tolerance after ':'");
  return t;
}
bool begins(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string factor_text(double v, double paper) {
  const double f = ratio_factor(v, paper);
  return std::isfinite(f) ? shown(f) + "x" : "not a multiple of the paper's,";
}
// at_least / at_most: the least value partly reaches, half the paper's effect past the baseline
// (without one, there is no partly: the paper's value itself).
double partly_bound(double paper, const std::optional<double>& baseline) {
  return baseline ? *baseline + (paper - *baseline) / 2 : paper;
}

// The verdict of ours' median under the claim's tolerance class (noise from its range).
Judgement judge_value(const ClaimSpec& spec, double paper, const Number& ours) {
  const std::string& judge = spec.judge;
  std::optional<double> baseline;
  if (!spec.baseline.empty()) baseline = std::strtod(spec.baseline.c_str(), nullptr);
  // Noise: the run's range holds the no-effect value (or the threshold), so it does not give the
  // effect's direction -- a re-run may land on either side.
  auto noise = [&](double x) { return ours.lo < ours.hi && ours.lo <= x && x <= ours.hi; };
  const std::string unit = spec.unit.empty() ? "" : " " + spec.unit;
  const std::string said = "ours " + shown_range(ours) + (paper != 0 ? ", " + shown(ours.v / paper) + "x the paper's " + shown(paper) : "");
  // Magnitude before noise: a range whose every point is past the claim's partly bound (or on
  // the wrong side of its threshold) is not reproduced, though it holds the no-effect value.
  const double nearest = std::clamp(paper, ours.lo, ours.hi);
  if (begins(judge, "above:") || begins(judge, "below:")) {
    const double x = tolerance_of(judge, judge.substr(0, 5));
    const bool above = judge[0] == 'a';
    if (above ? ours.hi < x : ours.lo > x)
      return {"not reproduced", "ours " + shown_range(ours) + ": the whole range is " + (above ? "below " : "above ") + shown(x) +
                                    (paper != 0 ? " (the paper's " + shown(paper) + ")" : "")};
    if (noise(x))
      return {"noise", "ours " + shown_range(ours) + ": the run's range holds " + shown(x) +
                           ", the claim's threshold, so it gives no direction"};
    const bool holds = above ? ours.v > x : ours.v < x;
    return {holds ? "reproduced" : "not reproduced",
            "ours " + shown_range(ours) + (holds ? " is " : " is not ") + (above ? "above " : "below ") + shown(x) +
                (paper != 0 ? " (the paper's " + shown(paper) + ")" : "")};
  }
  if (begins(judge, "match:") && ours.lo < ours.hi) {
    const double p = tolerance_of(judge, "match") / 100;
    if (ratio_factor(nearest, paper) > 1 + 2 * p)
      return {"not reproduced", said + ": even the range's point nearest the paper's, " + shown(nearest) + ", is " +
                                    factor_text(nearest, paper) + " off, past a factor of " + shown(1 + 2 * p)};
  }
  if ((judge == "at_least" || judge == "at_most") && ours.lo < ours.hi) {
    const bool least = judge == "at_least";
    const double bound = partly_bound(paper, baseline);
    if (least ? ours.hi < bound : ours.lo > bound)
      return {"not reproduced", "ours " + shown_range(ours) + ": the whole range is " + (least ? "below " : "above ") +
                                    (baseline ? shown(bound) + ", half the paper's effect past " + shown(*baseline) + " (the paper's " +
                                                    shown(paper) + ")"
                                              : "the paper's " + shown(paper))};
  }
  if (baseline && noise(*baseline))
    return {"noise", said + "; the run's range holds " + shown(*baseline) +
                         ", the no-effect value, so it gives no direction"};
  const bool same_side = baseline && (ours.v - *baseline) * (paper - *baseline) > 0;
  if (begins(judge, "match:")) {
    // Within a factor, the same above the paper's value as below it: reproduced within 1 + P,
    // partly within 1 + 2P, and on the paper's side of the baseline where there is one.
    const double p = tolerance_of(judge, "match") / 100;
    const double f = ratio_factor(ours.v, paper);
    if (f <= 1 + p && (!baseline || same_side)) return {"reproduced", said + " (within a factor of " + shown(1 + p) + ")"};
    if (baseline && !same_side) return {"not reproduced", said + ": the other side of " + shown(*baseline)};
    if (f <= 1 + 2 * p)
      return {"partly", said + (baseline ? ": the same direction, within a factor of " : ": within a factor of ") +
                            shown(1 + 2 * p) + ", not " + shown(1 + p)};
    return {"not reproduced", said + (baseline ? ": the same direction, but " : ": ") + factor_text(ours.v, paper) +
                                  " off, more than a factor of " + shown(1 + 2 * p)};
  }
  if (begins(judge, "within:")) {
    // A share (unit %) is also held to a factor of 2 of the paper's: points alone would pass a
    // sixth of a small share.
    const double d = tolerance_of(judge, "within");
    const double off = std::fabs(ours.v - paper);
    const bool share = spec.unit == "%" && paper > 0;
    const double factor = !share ? 1.0 : ours.v > 0 ? std::max(ours.v / paper, paper / ours.v) : INFINITY;
    const std::string what = "ours " + shown_range(ours) + " against the paper's " + shown(paper) + unit;
    if (factor > 2 && off <= 2 * d)
      return {"not reproduced", what + " (within " + shown(off <= d ? d : 2 * d) + " points, but " +
                                    (std::isfinite(factor) ? shown(factor) + "x" : "not a share of") + " the paper's share: "
                                    "more than a factor of 2)"};
    if (off <= d) return {"reproduced", what + " (within " + shown(d) + (share ? " points and a factor of 2)" : ")")};
    if (off <= 2 * d) return {"partly", what + " (within " + shown(2 * d) + ", not " + shown(d) + ")"};
    return {"not reproduced", what + " (off by " + shown(off) + ")"};
  }
  if (judge == "at_least" || judge == "at_most") {
    const bool least = judge == "at_least";
    if (least ? ours.v >= paper : ours.v <= paper)
      return {"reproduced", "ours " + shown_range(ours) + (least ? " is at least " : " is at most ") + "the paper's " + shown(paper)};
    // Partly: at least half the paper's effect past the baseline.
    if (same_side && (least ? ours.v >= partly_bound(paper, baseline) : ours.v <= partly_bound(paper, baseline)))
      return {"partly", "ours " + shown_range(ours) + " is past " + shown(*baseline) + " as the paper's, by at least half its "
                            "effect, but " + (least ? "below" : "above") + " its " + shown(paper)};
    return {"not reproduced", "ours " + shown_range(ours) + (least ? " is below " : " is above ") + "the paper's " + shown(paper) +
                                  (baseline ? " and on the other side of " + shown(*baseline) : "")};
  }
  throw Error("claims.csv: " + spec.id + ": judge '" + judge +
              "' is not one of match:P, within:D, at_least, at_most, above:X, below:X, none");
}

}  // namespace

Judgement judge_number(const ClaimSpec& spec, double paper, const Number& ours, double between_runs) {
  Judgement j = judge_value(spec, paper, ours);
  if (j.verdict == "noise") return j;
  const double lo = ours.lo - std::fabs(ours.lo) * between_runs, hi = ours.hi + std::fabs(ours.hi) * between_runs;
  if (lo == hi) return j;
  std::vector<std::string> between{j.verdict};
  for (double end : {lo, hi}) {
    const std::string v = judge_value(spec, paper, Number::exact(end)).verdict;
    if (std::find(between.begin(), between.end(), v) == between.end()) between.push_back(v);
  }
  if (between.size() == 1) return j;
  auto joined = [&](std::size_t from) {
    std::string out;
    for (std::size_t i = from; i < between.size(); ++i) out += (i == from ? "" : i + 1 < between.size() ? ", " : " and ") + between[i];
    return out;
  };
  const std::string widened = between_runs > 0 ? ", widened by its class's between-run spread (" + fmt(100 * between_runs, 3) +
                                                     "%) to [" + shown(lo) + ", " + shown(hi) + "],"
                                               : "";
  j.why = "between " + joined(0) + ": " + j.why + "; the run's range" + widened + " reaches " + joined(1);
  j.verdict = kUnsettled;
  j.reaches = between;
  return j;
}

}  // namespace moebench
