// moebench_claims_stability: whether two runs of the same commit give the same verdicts -- the
// ledgers (claims.csv) of the two, claim by claim; writes <out> (claims_stability.csv) and prints
// the share of run verdicts that agree and the claims that flipped.
#include <cstdio>
#include <fstream>
#include <set>
#include "harness/tool_command_line.h"
#include "harness/output_check.h"
#include "runtime/atomic_file.h"
#include "tools/claims/stability.h"

using namespace moebench;

int main(int argc, char** argv) {
  ToolCommandLine command_line("moebench_claims_stability",
                               "Two ledgers of two runs of the same commit, claim by claim: how many run verdicts agree.");
  CLI::App& app = command_line.app();
  std::string first, second, out, runs;
  make_required(add_path(app, "--first", first, "The first run's claims.csv"));
  make_required(add_path(app, "--second", second, "The second run's claims.csv"));
  make_required(add_path(app, "--out", out, "Where claims_stability.csv goes"));
  make_required(add_text(app, "--runs", runs, "TEXT", "What the two runs were (commit, machine, how), in every row"));
  std::string rerun_list;
  add_path(app, "--rerun", rerun_list,
           "A file listing the CSVs the second run wrote again, one per line, relative to the results folder; a claim "
           "reading none of them is not counted (default: every claim is)");
  if (const std::optional<int> exit_code = command_line.parse(argc, argv)) return *exit_code;
  try {
    if (auto e = check_output_file("--out", out)) throw Error(*e);
    std::set<std::string> rerun;
    if (!rerun_list.empty()) {
      std::ifstream in(rerun_list);
      if (!in) throw Error("--rerun: cannot read " + rerun_list);
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) rerun.insert(line);
      if (rerun.empty()) throw Error("--rerun: " + rerun_list + " names no CSV: the second run wrote nothing again");
    }
    const Agreement a = compare_ledgers(CsvRows::read(first), CsvRows::read(second), rerun);
    write_file_atomic(out, stability_csv(a, runs));
    std::printf("moebench_claims_stability: %d of %d run verdicts the same on both runs (%.1f%%); wrote %s\n", a.same,
                a.run_verdicts, 100 * a.share(), out.c_str());
    if (const auto d = median_relative_difference(a.pairs))
      std::printf("  the two runs' numbers differ by a median of %.1f%% (relative)\n", 100 * *d);
    for (const VerdictPair* p : a.flipped())
      std::printf("  %s: %s (%s) -> %s (%s)\n", p->claim.c_str(), p->first.c_str(), p->first_value.c_str(),
                  p->second.c_str(), p->second_value.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "moebench_claims_stability: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
