// moebench_claims: the claim ledger and the report -- every claim of experiments/reference/
// claims.csv judged from a results folder (this machine's runs, its cuda/ GPU runs and models/
// projections), written to <out>/claims.csv and <out>/REPORT.md. Run by the main job after the
// experiments, and by hand on a cluster's results folder.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include "harness/tool_command_line.h"
#include "harness/output_check.h"
#include "models/paper_values.h"
#include "runtime/atomic_file.h"
#include "tools/claims/ledger.h"
#include "tools/claims/report.h"

using namespace moebench;

int main(int argc, char** argv) {
  ToolCommandLine command_line("moebench_claims",
                               "The claim ledger: the four papers' claims judged from a results folder; writes "
                               "<out>/claims.csv and <out>/REPORT.md.");
  CLI::App& app = command_line.app();
  std::string results = std::string(MOEBENCH_SOURCE_DIR) + "/results", out, reference;
  add_path(app, "--results", results, "Results folder to judge (default: the source tree's results/)");
  add_path(app, "--out", out, "Where claims.csv and REPORT.md go (default: --results)");
  add_path(app, "--reference", reference, "The papers (papers.csv), their numbers and claims (default: experiments/reference/)");
  if (const std::optional<int> exit_code = command_line.parse(argc, argv)) return *exit_code;
  try {
    if (!std::filesystem::is_directory(results)) throw Error("--results: " + results + " is not a folder");
    if (out.empty()) out = results;
    if (auto e = check_output_folder("--out", out)) throw Error(*e);
    if (!reference.empty()) {
      for (const char* file : {"values.csv", "claims.csv", "papers.csv"})
        if (!std::filesystem::is_regular_file(reference + "/" + file))
          throw Error("--reference: " + reference + " holds no " + file + " (it needs values.csv, claims.csv and papers.csv)");
      setenv("MOEBENCH_REFERENCE", reference.c_str(), 1);
    }
    const std::vector<Paper> papers = read_papers(reference_dir() + "/papers.csv");
    const std::vector<ClaimResult> claims = judge_claims(read_claim_specs(reference_dir() + "/claims.csv"), results);
    // The report names the folder as the user gave it, so it does not change with the checkout's path.
    write_file_atomic(out + "/claims.csv", claims_csv(claims));
    std::filesystem::path name = std::filesystem::path(results).lexically_normal();
    if (name.filename().empty()) name = name.parent_path();
    std::optional<CsvRows> stability;
    if (std::filesystem::is_regular_file(results + "/claims_stability.csv"))
      stability = CsvRows::read(results + "/claims_stability.csv");
    write_file_atomic(out + "/REPORT.md",
                      claims_report(claims, papers, name.filename().string() + "/",
                                    results, stability ? &*stability : nullptr));
    std::map<std::string, int> n;
    for (const ClaimResult& c : claims) ++n[c.verdict];
    std::printf("moebench_claims: %zu claims:", claims.size());
    for (const auto& [v, k] : n) std::printf(" %d %s;", k, v.c_str());
    std::printf("\nwrote %s/claims.csv and %s/REPORT.md\n", out.c_str(), out.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "moebench_claims: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
