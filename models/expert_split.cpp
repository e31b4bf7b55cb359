#include "models/expert_split.h"

namespace moebench {

std::optional<std::string> expert_split_error(int experts, int group, const std::string& what, bool replicas) {
  if (group >= 1 && experts >= 1 && (experts % group == 0 || (replicas && group % experts == 0))) return std::nullopt;
  auto s = [](int v) { return std::to_string(v); };
  std::string divisors;  // the group sizes these experts do split over
  for (int d = 1; d <= experts; ++d)
    if (experts % d == 0) divisors += (divisors.empty() ? "" : ", ") + s(d);
  return "--experts: " + s(experts) + " experts cannot be split evenly over " + s(group) + " ranks" +
         (what.empty() ? "" : " (" + what + ")") + "; allowed: --experts a multiple of " + s(group) +
         (replicas ? " or a divisor of it" : "") + ", or ranks that divide " + s(experts) + " (" + divisors + ")";
}

}  // namespace moebench
