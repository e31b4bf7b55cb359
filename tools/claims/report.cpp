#include "tools/claims/report.h"
#include "tools/claims/node_setting.h"
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include "harness/csv.h"
#include "kernels/exec.h"
#include "tools/claims/between_runs.h"
#include "tools/claims/stability.h"
#include "tools/claims/torch_comparisons.h"

namespace moebench {

std::string markdown_cell(std::string s) {
  for (char& c : s)
    if (c == '|' || c == '\n') c = c == '|' ? '/' : ' ';
  return s.empty() ? "-" : s;
}

namespace {

const char* const kVerdicts[] = {"reproduced", "partly",     "unsettled",    "contradicted",       "not reproduced",
                                 "noise",      kOffHardware, "modelled only", "not measurable here"};

std::string ours_of(const ClaimResult& c) {
  std::string out;
  for (auto [s, label] : {std::pair{&c.gpu, "GPU"}, std::pair{&c.local, "here"}, std::pair{&c.model, "model"}})
    if (s->value)
      out += (out.empty() ? "" : "; ") + fmt(s->value->v, 3) + " (" + label +
             (s->verdict == "not comparable" || s->verdict == kOffHardware ? ", other hardware" : "") + ")";
  return out.empty() ? "-" : out;
}

std::string ratio_of(const ClaimResult& c) {
  for (const SettingResult* s : {&c.gpu, &c.local, &c.model})
    if (s->value && c.paper != 0 && s->verdict != "not comparable" && s->verdict != kOffHardware)
      return fmt(s->value->v / c.paper, 3);
  return "-";
}

// Where a claim's number comes from: a GPU run (the paper's class of hardware), this machine's runs
// at its scale, the model at the paper's scale, arithmetic on the papers' specs (parameter and
// FLOP counts), or nowhere.
enum class Part { gpu, here, model, specs, none };

const char* part_title(Part p) {
  switch (p) {
    case Part::gpu: return "Measured on a GPU";
    case Part::here: return "Measured on this machine, at its scale";
    case Part::model: return "Modelled at the paper's scale";
    case Part::specs: return "Arithmetic on the papers' specs";
    case Part::none: return "Not measurable here";
  }
  return "";
}

Part part_of(const ClaimResult& c) {
  if (c.why.rfind("GPU run", 0) == 0) return Part::gpu;
  if (c.why.rfind("this machine", 0) == 0 || c.verdict == kOffHardware) return Part::here;
  if (c.verdict != "modelled only") return Part::none;
  for (const auto& [f, prov] : c.model.provenance_of)
    if (f != "models/param_counts.csv" && f != "models/m6t_flops.csv") return Part::model;
  return Part::specs;
}

// The setting whose run gave the claim's verdict (nullptr: none did).
const SettingResult* judging_setting(const ClaimResult& c) {
  if (c.why.rfind("GPU run", 0) == 0) return &c.gpu;
  if (c.why.rfind("this machine", 0) == 0) return &c.local;
  return nullptr;
}

// "cpu at the local scale; cuda at the paper scale": what the runs the ledger read were.
std::string runs_read(const std::vector<ClaimResult>& claims) {
  std::set<std::string> seen;
  for (const ClaimResult& c : claims)
    for (const SettingResult* s : {&c.local, &c.gpu})
      if (s->value && s->verdict != kStaleEvidence)
        for (const auto& [f, o] : s->origin_of)
          if (o.backend != "model" && o.backend != "-") seen.insert(o.backend + " at the " + o.scale + " scale");
  std::string out;
  for (const std::string& s : seen) out += (out.empty() ? "" : "; ") + s;
  return out.empty() ? "no run" : out;
}

// How many verdicts came from runs at the tiny scale (a smoke test's sizes).
int tiny_verdicts(const std::vector<ClaimResult>& claims) {
  int n = 0;
  for (const ClaimResult& c : claims)
    if (const SettingResult* s = judging_setting(c)) {
      bool tiny = false;
      for (const auto& [f, o] : s->origin_of) tiny = tiny || o.scale == "tiny";
      n += tiny;
    }
  return n;
}

// How far the verdicts hold: the figure of claims_stability.csv over the claims that can move, the
// claims that flipped, and the between-run spread of each class that widens this machine's ranges.
std::string stability_section(const CsvRows* t, const std::vector<ClaimResult>& claims) {
  std::ostringstream md;
  md << "## How far the verdicts hold\n\n";
  if (!t || t->size() == 0) {
    md << "No two runs of one commit have been compared for this results folder (`experiments/claims/stability.sh` "
          "runs the experiments twice and writes `claims_stability.csv`), so no range is widened by a between-run "
          "spread.\n\n";
    return md.str();
  }
  int counted = 0, same = 0, still = 0;
  std::vector<std::string> flips;
  for (std::size_t r = 0; r < t->size(); ++r) {
    const std::string s = t->cell(r, "same");
    if (s == "-") continue;
    const auto move = relative_move(t->cell(r, "first_value"), t->cell(r, "second_value"));
    if (move && *move == 0) {  // a count, a seeded run: it cannot move
      ++still;
      continue;
    }
    ++counted;
    if (s == "yes") {
      ++same;
    } else {
      flips.push_back(t->cell(r, "claim") + ": " + t->cell(r, "first_verdict") + " (" + t->cell(r, "first_value") + ") then " +
                      t->cell(r, "second_verdict") + " (" + t->cell(r, "second_value") + ")");
    }
  }
  md << "Two runs (" << t->cell(0, "runs") << "): " << same << " of the " << counted
     << " claims whose number can move got the same verdict on both (" << fmt(counted ? 100.0 * same / counted : 100, 3)
     << "%; `claims_stability.csv`; " << still << " more gave the same number twice: counts and seeded runs, "
     << "which cannot move)" << (flips.empty() ? ".\n\n" : ". The others:\n\n");
  for (const std::string& f : flips) md << "- " << f << "\n";
  if (!flips.empty()) md << "\n";
  std::vector<ClaimSpec> specs;
  for (const ClaimResult& c : claims) specs.push_back(c.spec);
  const BetweenRuns measured = between_runs(*t, specs);
  md << "How far each class of claims moved between the two runs, |a - b| / max(|a|, |b|). This machine's ranges "
        "are widened at each end by their class's 90th percentile (not those whose number did not move); a verdict that does not hold over the widened "
        "range is *unsettled* (docs/claims.md):\n\n"
        "| class | moved | did not move | median move | 90th percentile |\n|---|---|---|---|---|\n";
  for (const auto& [cls, sp] : measured.classes)
    md << "| " << cls << " | " << sp.moved << " | " << sp.still << " | " << (sp.moved ? fmt(100 * sp.median, 3) + "%" : "-")
       << " | " << (sp.moved ? fmt(100 * sp.p90, 3) + "%" : "-") << " |\n";
  md << "\n";
  return md.str();
}

}  // namespace

std::string claims_report(const std::vector<ClaimResult>& claims, const std::vector<Paper>& papers,
                          const std::string& results, const std::string& results_dir, const CsvRows* stability) {
  for (const ClaimResult& c : claims)
    if (std::none_of(papers.begin(), papers.end(), [&](const Paper& p) { return p.key == c.spec.paper; }))
      throw Error("claim " + c.spec.id + ": paper '" + c.spec.paper + "' is not in papers.csv");
  std::ostringstream md;
  md << "# What the suite reproduces of the four papers\n\n";
  // The headline counts the verdicts that hold over their run's range widened by the between-run spread.
  int reproduced = 0, unsettled = 0;
  for (const ClaimResult& c : claims) reproduced += c.verdict == "reproduced", unsettled += c.verdict == kUnsettled;
  md << "**" << reproduced << " of the " << claims.size() << " claims reproduced** over the range of their run, widened "
     << "by what a second run moves; " << unsettled << " unsettled (a run of the same code may give another verdict than its median's; each names those it lies "
     << "between).\n\n";
  if (const int tiny = tiny_verdicts(claims))
    md << "> **Tiny scale.** " << tiny << " of the verdicts below come from runs at the tiny scale, a smoke test's sizes: "
       << "their ratios say nothing of the papers' claims. Judge the local or the paper scale's runs.\n\n";
  md << "Generated by `build/tools/moebench_claims` from the CSVs in `" << results << "` (runs read: " << runs_read(claims)
     << ") and the papers' numbers in `experiments/reference/`; do not edit (the test `claims.report` regenerates it). "
     << "`claims.csv` beside it holds every number below with its range, its CSVs and their provenance.\n\n"
     << "## Scope\n\n"
     << claims.size() << " claims: every table's headline cells and the quantitative or ordering statements of the text "
     << "(`experiments/reference/claims.csv`). Each is judged from three settings: this machine's runs (the results "
     << "folder), a GPU run (its `cuda/`) and the calibrated performance model at the papers' scale (its `models/`). A verdict comes from a run -- the GPU run where there is one, else this "
     << "machine's; a number only the model gives is *modelled only*. A time in absolute units is judged only on the "
     << "paper's own hardware; elsewhere the claims are ratios, shares and orderings. *reproduced*: within the "
     << "claim's tolerance of the paper's value (or past its bound, on the side of its threshold). *partly*: the same "
     << "effect, not the same size (within twice the tolerance, on the paper's side of the no-effect value). *not "
     << "reproduced*: neither; also a range every point of which is past the partly band. *unsettled*: the run's range, "
     << "widened at each end by the between-run spread of the claim's class (below), reaches another verdict; the line "
     << "names the verdicts it lies between. *noise*: the run's own range holds the no-effect value and reaches the "
     << "partly band, so it gives no direction and no verdict. *contradicted*: "
     << "the run says reproduced or partly, but another of the suite's settings (the GPU run, this machine, the model "
     << "at the paper's scale) says not reproduced. *" << kOffHardware << "*: the run lacks what the claim is about: a "
     << "GPU (kernels, tensor cores, a GPU's memory or overlap), a link that uses a core (compute slowing communication; "
     << "the emulated link sleeps), a core per pipeline stage (a bubble) or per rank (how a step's time divides), or "
     << "two nodes or more (a claim resting on the split between a node's links and the network). *modelled only*: "
     << "only the model at the paper's scale gives a number. *not measurable here*: no setting gives one (model "
     << "quality, a cluster's absolute time), or the only one is a stale GPU run. docs/claims.md gives each tolerance "
     << "and its reason.\n\n";

  md << "## Verdicts\n\n| paper |";
  for (const char* v : kVerdicts) md << " " << v << " |";
  md << " claims |\n|---|";
  for (std::size_t i = 0; i <= std::size(kVerdicts); ++i) md << "---|";
  md << "\n";
  std::map<std::string, int> total;
  for (const Paper& p : papers) {
    std::map<std::string, int> n;
    int all = 0;
    for (const ClaimResult& c : claims)
      if (c.spec.paper == p.key) ++n[c.verdict], ++total[c.verdict], ++all;
    md << "| [" << p.name << " (" << p.key << ")](#" << p.anchor << ") |";
    for (const char* v : kVerdicts) md << " " << n[v] << " |";
    md << " " << all << " |\n";
  }
  md << "| all |";
  for (const char* v : kVerdicts) md << " " << total[v] << " |";
  md << " " << claims.size() << " |\n\n";
  std::vector<std::string> between;
  for (const ClaimResult& c : claims)
    if (c.verdict == kUnsettled && !c.reaches.empty()) {
      std::string names = c.reaches[0];
      for (std::size_t i = 1; i < c.reaches.size(); ++i) names += (i + 1 < c.reaches.size() ? ", " : " and ") + c.reaches[i];
      between.push_back(c.spec.id + ": between " + names);
    }
  md << between.size() << " verdicts are unsettled: their run's range, widened by their class's between-run spread, "
     << "reaches another verdict" << (between.empty() ? ".\n" : ":\n\n");
  for (const std::string& m : between) md << "- " << m << "\n";
  md << "\n" << stability_section(stability, claims);

  // Each paper's claims in four parts, by where their number comes from (and the rest).
  for (const Paper& p : papers) {
    md << "## " << p.name << " (" << p.key << ")\n\n*" << p.title << "*\n\n"
       << "![ours over the paper's, claim by claim](claims_" << p.key << ".png)\n\n";
    for (Part part : {Part::gpu, Part::here, Part::model, Part::specs, Part::none}) {
      bool any = false;
      for (const ClaimResult& c : claims) {
        if (c.spec.paper != p.key || part_of(c) != part) continue;
        if (!any)
          md << "### " << part_title(part) << "\n\n"
             << "| claim | where | the paper says | paper | ours | ours / paper | verdict | why | on a cluster |\n"
             << "|---|---|---|---|---|---|---|---|---|\n";
        any = true;
        const std::string paper = c.spec.judge == "none" ? "-" : fmt(c.paper, 4) + (c.spec.unit.empty() ? "" : " " + c.spec.unit);
        md << "| " << markdown_cell(c.spec.id) << " | " << markdown_cell(c.spec.where) << " | " << markdown_cell(c.spec.text) << " | " << markdown_cell(paper)
           << " | " << markdown_cell(ours_of(c)) << " | " << markdown_cell(ratio_of(c)) << " | **" << c.verdict << "** | "
           << markdown_cell(c.why + (c.spec.note.empty() ? "" : ". " + c.spec.note)) << " | "
           << (c.spec.cluster_command.empty() ? "-" : "`" + markdown_cell(c.spec.cluster_command) + "`") << " |\n";
      }
      if (any) md << "\n";
    }
  }

  std::vector<ClaimSpec> specs;
  for (const ClaimResult& c : claims) specs.push_back(c.spec);
  md << node_setting_section(specs, results_dir);

  // A GPU row of PyTorch's beside ours is held to the ledger's rule for GPU evidence: against
  // this machine's newest run the claims read.
  const std::optional<RunOrigin> local = newest_local_run(specs, results_dir);
  const std::string repo = ledger_checkout();
  md << torch_comparisons_section(results_dir, [&](const RunOrigin& gpu) {
    return !local ? std::string("no run of this machine's to compare it with")
                  : stale_gpu_evidence(repo, gpu, *local).value_or("");
  });

  md << "## What the assumptions decide\n\nEvery number the model projects at the paper's scale, re-projected with each "
        "assumed input of the papers' profiles (an assumption, or a GPU curve transferred from another GPU) at the ends of "
        "its stated range (`models/assumption_ranges.csv`; every row in `models/sensitivity.csv`). *rests on an "
        "assumption*: a value within an input's range gives another verdict, so the model's verdict is the "
        "assumption's, not a measurement's.\n\n| claim | model | paper | model's verdict | what the assumed inputs do |\n"
        "|---|---|---|---|---|\n";
  for (const ClaimResult& c : claims)
    if (c.model.value && !c.model_assumptions.empty())
      md << "| " << markdown_cell(c.spec.id) << " | " << fmt(c.model.value->v, 3) << " | " << fmt(c.paper, 4) << " | "
         << markdown_cell(c.model.verdict) << " | " << markdown_cell(c.model_assumptions) << " |\n";
  md << "\n";

  md << "## Not measurable here\n\nWhat the results folder cannot judge, why, and the command that would measure it on a "
        "cluster (docs/cluster.md).\n\n| claim | why | on a cluster |\n|---|---|---|\n";
  for (const ClaimResult& c : claims)
    if (c.verdict == "not measurable here" || c.verdict == "modelled only")
      md << "| " << markdown_cell(c.spec.id) << " | " << markdown_cell(c.verdict == "modelled only" ? "modelled only; " + c.why : c.why)
         << " | " << (c.spec.cluster_command.empty() ? "-" : "`" + c.spec.cluster_command + "`") << " |\n";
  md << "\n## Checking the rest on a cluster\n\nThe claims a run judged but did not reproduce (partly, unsettled, not "
        "reproduced, noise), with the run they were judged on above, and the command that measures them at the paper's scale on GPUs "
        "(then `experiments/claims/report.sh --results DIR` on that folder).\n\n| claim | verdict | on a cluster |\n|---|---|---|\n";
  for (const ClaimResult& c : claims)
    if (c.verdict == "partly" || c.verdict == kUnsettled || c.verdict == "not reproduced" || c.verdict == "noise" ||
        c.verdict == kContradicted || c.verdict == kOffHardware)
      md << "| " << markdown_cell(c.spec.id) << " | " << c.verdict << " | "
         << (c.spec.cluster_command.empty() ? "-" : "`" + c.spec.cluster_command + "`") << " |\n";

  md << "\n## Provenance\n\nEvery CSV a number above came from, as its first row records it.\n\n"
     << "| CSV | backend, device, ranks, link, dtype, scale, commit, date |\n|---|---|\n";
  std::map<std::string, std::string> seen;
  for (const ClaimResult& c : claims)
    for (auto [s, prefix] : {std::pair{&c.local, ""}, std::pair{&c.gpu, "cuda/"}, std::pair{&c.model, ""}})
      if (s->value)
        for (const auto& [f, p] : s->provenance_of) seen.emplace(std::string(prefix) + f, p);
  for (const auto& [f, p] : seen) md << "| `" << f << "` | " << markdown_cell(p) << " |\n";
  return md.str();
}

}  // namespace moebench
