// Imbalanced routing as a workload: tokens that steer the gate's first pick to a chosen expert
// popularity, so a benchmark can measure a layer under skew (a real router trained on real data
// is rarely uniform). Token t draws its expert e from the popularity (seeded, the same on every
// rank and layout for the same token) and gains kSteer times the unit vector of the gate's
// column e: its logit for e then leads the others by kSteer standard deviations of a random
// token's logits. The gate, dispatch and experts run unchanged; what they route is measured
// (busiest expert over the mean), not assumed.
//   natural   the tokens as drawn (no steering): whatever the gate makes of them
//   uniform   every expert equally likely
//   zipf:S    expert i (0-based) with weight 1 / (i + 1)^S, S > 0
//   hot:F     expert 0 takes a share F in (0, 1) of the tokens, the others share the rest equally
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moebench {

struct Popularity {
  enum class Kind { natural, uniform, zipf, hot } kind = Kind::natural;
  double parameter = 0;  // S or F
  std::string text = "natural";
};

// Parses `text` given to `option`; an error names the option and the forms allowed.
std::optional<std::string> parse_popularity(const std::string& option, const std::string& text, Popularity* out);
// Each expert's probability (sums to 1); empty for natural.
std::vector<double> popularity_weights(const Popularity& p, int experts);
// Steers x [tokens, hidden] (fp32, host; drawn with standard deviation `token_std` per value),
// tokens number [first_token, first_token + tokens) of the run, by the gate's weights gate
// [hidden, experts]. Natural leaves x as it is.
void steer_tokens(std::vector<float>& x, int tokens, int hidden, double token_std, const std::vector<float>& gate,
                  int experts, const Popularity& p, std::uint64_t seed, std::size_t first_token);
// The busiest expert's load over the mean load of `per_expert` (1: balanced).
double busiest_over_mean(const std::vector<double>& per_expert);

}  // namespace moebench
