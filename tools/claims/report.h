// results/REPORT.md from the judged claims: the scope, a count per verdict, one section per
// paper (the paper's value, ours, their ratio, the verdict and one line of why), what is not
// measurable on the machine the results came from with the command that would measure it, and
// the provenance of every CSV a number came from. Nothing in it is typed: it is regenerated
// from results/ and experiments/reference/ (moebench_claims), and the same inputs give the same
// text.
#pragma once
#include <string>
#include <vector>
#include "tools/claims/ledger.h"
#include "tools/claims/papers.h"

namespace moebench {

// `s` as a Markdown table cell: no pipes or line breaks; "-" for nothing.
std::string markdown_cell(std::string s);

// `papers`: one section each, in their order (papers.csv); a claim of a paper not among them is an
// Error. `results`: the folder as the report names it; `results_dir`: where it is (PyTorch's
// comparisons are read from it). `stability`: its claims_stability.csv (two runs of one commit
// compared, moebench_claims_stability), when it has one.
std::string claims_report(const std::vector<ClaimResult>& claims, const std::vector<Paper>& papers,
                          const std::string& results, const std::string& results_dir, const CsvRows* stability = nullptr);

}  // namespace moebench
