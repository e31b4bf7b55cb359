// The claim ledger: every claim of the four papers (experiments/reference/claims.csv), judged
// from three settings -- this machine's runs (results/), a GPU run (results/cuda/) and the
// calibrated model at the papers' scale (results/models/) -- each a number computed by the
// claim's expression (tools/claims/expression.h), its ratio to the paper's and a verdict by the
// claim's tolerance class (tools/claims/verdict.h; `none`: what the suite does not measure, with
// why and the command that would measure it where one exists). A number from hardware the claim is not about
// is not judged (kOffHardware); a verdict the suite's other settings contradict is not
// "reproduced" (kContradicted). This machine's ranges are widened by the between-run spread of the
// claim's class, measured by a stability pair in the results folder (tools/claims/between_runs.h).
// An absolute time is judged only on the paper's hardware. A claim's verdict is its GPU run's,
// else this machine's; a number only the model gives makes it "modelled only", never
// "reproduced".
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>
#include "tools/claims/expression.h"
#include "tools/claims/gpu_evidence.h"
#include "tools/claims/verdict.h"

namespace moebench {

struct ClaimSpec {
  std::string id, paper, where, text, quantity, paper_value, unit, judge, baseline, hardware, local, gpu, model,
      why_not, cluster_command, note;
  // What a measurement must run on to judge the claim: "" anything; "gpu" a GPU run (a claim about
  // kernels, tensor cores, a GPU's memory or its overlap); "core_link" a link that uses a core
  // (not the emulated link, which sleeps: compute cannot slow it); "core_per_stage" a pipeline
  // whose stages each have a core (not more stages than cores); "core_per_rank" a phase split
  // measured with a core for each rank. Both read the CSVs' processors (or
  // simulator_processors) column. "nodes" a run over two nodes or more (its CSVs' nodes column):
  // a claim that rests on the split between a node's links and the network between nodes
  // (tools/claims/node_setting.h). Several kinds join with '+'. Elsewhere the setting's verdict
  // is kOffHardware.
  std::string relevant_hardware;
  // The claims (ids, space-separated) whose modelled numbers this claim's modelled ratio is made
  // of, such as a table's absolute times: the model overrules a measured verdict only where it
  // reproduces each of them (or partly). A model off in those does not speak for the ratio.
  std::string model_base;
};

// A setting's verdict (and a claim's, when no other setting judges it) where its number comes
// from hardware the claim is not about.
inline constexpr const char* kOffHardware = "not on the relevant hardware";
// A claim's verdict when the run that judges it says reproduced or partly and another setting of
// the suite's own (the GPU run, this machine, the model at the paper's scale) says not reproduced.
inline constexpr const char* kContradicted = "contradicted";
// A GPU setting's verdict where its run may not judge beside this machine's (gpu_evidence.h).
inline constexpr const char* kStaleEvidence = "stale";

struct SettingResult {
  std::optional<Number> value;
  std::string missing;     // why there is no number
  std::string files;       // the CSVs read, space-separated, relative to results/
  std::string provenance;  // backend, device, ranks, link, scale, commit, date of the first of them
  std::map<std::string, std::string> provenance_of;  // ... of each of them
  std::map<std::string, RunOrigin> origin_of;          // the commit and date of each of them
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

// The newest of this machine's runs the claims read under `results` (their commit and date; the
// models' projections are not runs): what GPU evidence must agree with.
std::optional<RunOrigin> newest_local_run(const std::vector<ClaimSpec>& specs, const std::string& results);
// The git checkout the ledger belongs to (that of experiments/reference/): where GPU evidence's
// commits are looked up.
std::string ledger_checkout();
// The claim's paper value (its paper_value expression: paper() and numbers only).
double claim_paper_value(const ClaimSpec& spec);
// Judges every claim from `results` (this machine's folder; its cuda/ and models/ inside it,
// models/sensitivity.csv naming what the assumptions decide of each modelled number).
std::vector<ClaimResult> judge_claims(const std::vector<ClaimSpec>& specs, const std::string& results);
// ... with `repo`, a folder of the git checkout whose history tells whether the GPU run's code is
// this machine's runs' (by default the checkout of the papers' reference folder).
std::vector<ClaimResult> judge_claims(const std::vector<ClaimSpec>& specs, const std::string& results,
                                      const std::string& repo);
// results/claims.csv's text (no provenance of its own: each number names its CSVs).
std::string claims_csv(const std::vector<ClaimResult>& claims);

}  // namespace moebench
