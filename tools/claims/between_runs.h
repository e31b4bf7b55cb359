// How far a claim's number moves between two runs of one commit, by the claim's class, measured by
// a stability pair (claims_stability.csv, tools/claims/stability.h): one run's repetitions do not
// show what a second launch moves. A claim whose number is the same in both runs (a count, a
// seeded computation, the model) cannot move and enters no class's spread. The ledger widens this
// machine's ranges by the 90th percentile of the claim's class (verdict.h).
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>
#include "models/csv_rows.h"

namespace moebench {

struct ClaimSpec;

// "timing ratio" (unit x), "fit residual" (a % held below or above a threshold: how far a line fits),
// "share" (the other % and points), "absolute" (a time, a throughput) or "fraction" (the rest: a
// bubble, a c_v, an error).
std::string claim_class(const ClaimSpec& spec);

struct ClassSpread {
  int moved = 0;           // the class's claims whose number moved between the two runs
  int still = 0;           // ... whose number is the same in both (they enter neither figure)
  double median = 0, p90 = 0;  // of the moved claims' relative moves, |a - b| / max(|a|, |b|)
};
struct BetweenRuns {
  std::map<std::string, ClassSpread> classes;
  std::set<std::string> still;  // the claims whose number was the same in both runs: it cannot move
};

// The relative move of one claim between two runs; nullopt where either is not a number.
std::optional<double> relative_move(const std::string& first, const std::string& second);

// Over the counted claims of `stability` (claims_stability.csv's rows, `same` not "-") that `specs`
// holds. The 90th percentile is the nearest rank's.
BetweenRuns between_runs(const CsvRows& stability, const std::vector<ClaimSpec>& specs);

// What the ledger widens a claim's range by: its class's 90th percentile; 0 where the claim's own
// number did not move or none of its class did. A claim the pair did not hold gets its class's.
double between_run_spread(const BetweenRuns& measured, const ClaimSpec& spec);

}  // namespace moebench
