// The verdict of one number against the paper's under the claim's tolerance class, and why:
//   match:P     within a factor of 1 + P/100 of the paper's value (partly: 1 + 2P/100, and on the
//               paper's side of the baseline where there is one)
//   within:D    within D of it, in its unit (shares in points, and a factor of 2; partly: 2D)
//   at_least / at_most   at least / at most the paper's bound (partly: half its effect past the baseline)
//   above:X / below:X    an ordering or direction: above / below X
// A range that holds the baseline (the no-effect value) or the threshold is noise, unless every
// point of it is past the partly band (magnitude before noise). A verdict holds only where it holds
// over the run's range widened by the between-run spread of the claim's class
// (tools/claims/between_runs.h); otherwise it is kUnsettled, naming the verdicts it lies between.
#pragma once
#include <string>
#include <vector>
#include "tools/claims/expression.h"

namespace moebench {

struct ClaimSpec;

// A verdict whose run's range, widened by its class's between-run spread, reaches another verdict
// at an end: a second run of the same code may give either.
inline constexpr const char* kUnsettled = "unsettled";

// `reaches`: where the verdict is kUnsettled, the verdicts it lies between, the median's first
// (`why` begins with them); empty otherwise.
struct Judgement {
  std::string verdict, why;
  std::vector<std::string> reaches = {};
};
// `between_runs`: the relative spread by which the run's range is widened at each end (0: the
// range as measured; a model's number and a count have none).
Judgement judge_number(const ClaimSpec& spec, double paper, const Number& ours, double between_runs = 0);

}  // namespace moebench
