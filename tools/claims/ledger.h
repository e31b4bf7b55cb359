// The claim ledger: every claim of the four papers (experiments/reference/claims.csv), judged
// from three settings -- this machine's runs (results/), a GPU run (results/cuda/) and the
// calibrated model at the papers' scale (results/models/) -- each a number computed by the
// claim's expression (tools/claims/expression.h), its ratio to the paper's and a verdict by the
// claim's tolerance class:
//   match:P     within P% of the paper's value (partly: the same side of the baseline, or 2P%)
//   within:D    within D of it, in its unit (shares in points; partly: 2D)
//   at_least / at_most   at least / at most the paper's bound (partly: past the baseline)
//   above:X / below:X    an ordering or direction: above / below X
//   none        what the suite does not measure (model quality after pre-training): why, and
//               the command that would measure it where one exists
// A verdict is refused (noise) where the run's range holds the baseline, the no-effect value;
// one whose range reaches another verdict at an end names it (Judgement::reaches).
// An absolute time is judged only on the paper's hardware. A claim's verdict is its GPU run's,
// else this machine's; a number only the model gives makes it "modelled only", never
// "reproduced".
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>
#include "tools/claims/expression.h"

namespace moebench {

struct ClaimSpec {
  std::string id, paper, where, text, quantity, paper_value, unit, judge, baseline, hardware, local, gpu, model,
      why_not, cluster_command, note;
};

struct SettingResult {
  std::optional<Number> value;
  std::string missing;     // why there is no number
  std::string files;       // the CSVs read, space-separated, relative to results/
  std::string provenance;  // backend, device, ranks, link, scale, commit, date of the first of them
  std::map<std::string, std::string> provenance_of;  // ... of each of them
  std::string device;
  std::string setting;     // where the first CSV ran: backend and device, ranks, link, scale
  std::string verdict;     // "" where there is no number
  std::string why;
  std::vector<std::string> reaches;  // the other verdicts the run's range reaches (Judgement::reaches)
};

struct ClaimResult {
  ClaimSpec spec;
  double paper = 0;
  SettingResult local, gpu, model;
  std::string verdict, why;
  std::vector<std::string> reaches;  // ... of the run the verdict is from
  // What the assumed inputs decide of the modelled number (models/sensitivity.csv): the input
  // that changes its verdict within its range, or the one that moves it most; "" without the file.
  std::string model_assumptions;
  bool rests_on_assumption = false;  // an assumed input's range holds another verdict
};

std::vector<ClaimSpec> read_claim_specs(const std::string& path);
// The claim's paper value (its paper_value expression: paper() and numbers only).
double claim_paper_value(const ClaimSpec& spec);
// Judges every claim from `results` (this machine's folder; its cuda/ and models/ inside it,
// models/sensitivity.csv naming what the assumptions decide of each modelled number).
std::vector<ClaimResult> judge_claims(const std::vector<ClaimSpec>& specs, const std::string& results);
// results/claims.csv's text (no provenance of its own: each number names its CSVs).
std::string claims_csv(const std::vector<ClaimResult>& claims);

// The verdict of `ours` against the paper's value under `spec`'s tolerance class, and why.
// `reaches`: the other verdicts the ends of ours' range would get (where its verdict is not
// noise), said in `why` too -- the verdicts a re-run of the same code may give.
struct Judgement {
  std::string verdict, why;
  std::vector<std::string> reaches;
};
Judgement judge_number(const ClaimSpec& spec, double paper, const Number& ours);

}  // namespace moebench
