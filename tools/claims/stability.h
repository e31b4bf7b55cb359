// How far a verdict holds: two ledgers (claims.csv) of two runs of the same commit, claim by
// claim. A run verdict is one a run gives (reproduced, partly, contradicted, not reproduced,
// noise); the figure is the share of claims with a run verdict in either ledger whose verdicts
// are the same in both. experiments/claims/stability.sh makes the two runs; REPORT.md states the
// figure from <results>/claims_stability.csv.
#pragma once
#include <optional>
#include <set>
#include <string>
#include <vector>
#include "models/csv_rows.h"

namespace moebench {

bool is_run_verdict(const std::string& verdict);

struct VerdictPair {
  std::string claim, first, second;
  std::string first_value, second_value;  // the number each verdict came from ("-": none)
  bool counted = false;  // a run verdict in either, from a CSV the second run wrote again
};

struct Agreement {
  std::vector<VerdictPair> pairs;  // every claim of the first ledger, in its order
  int run_verdicts = 0, same = 0;  // claims with a run verdict in either ledger; of those, the same in both
  double share() const { return run_verdicts ? double(same) / run_verdicts : 1.0; }
  std::vector<const VerdictPair*> flipped() const;
};

// The median over claims of how far the two runs' numbers are apart (between_runs.h's
// relative_move), over the counted claims whose number moved -- a count or a seeded run gives the
// same twice and cannot (none: no such claim): what a second launch moves a number by, which one
// run's repetitions do not show.
std::optional<double> median_relative_difference(const std::vector<VerdictPair>& pairs);

// Throws Error when the ledgers do not hold the same claims. `rerun`: the CSVs (relative to the
// results folder) the second run wrote again; a claim whose CSVs are none of them is not counted
// (both ledgers read the same file). Empty: every claim is.
Agreement compare_ledgers(const CsvRows& first, const CsvRows& second, const std::set<std::string>& rerun = {});
// claims_stability.csv: one row per claim, `runs` (what the two runs were) in every row.
std::string stability_csv(const Agreement& a, const std::string& runs);

}  // namespace moebench
