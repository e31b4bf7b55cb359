// moebench_project: the papers' tables as the performance models project them, beside the
// papers' values (000 Tables 1-3 on the 000 cluster, 001 Table 1 on the 001 machine), each row
// labelled as modelled with the profile it used, and what the assumed inputs decide of each
// modelled claim (sensitivity.csv). Writes <out>/models/*.csv.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include "harness/tool_command_line.h"
#include "harness/output_check.h"
#include <unistd.h>
#include "models/paper_values.h"
#include "tools/assumption_sensitivity.h"
#include "tools/local_comparison.h"
#include "tools/paper_projections.h"

using namespace moebench;

int main(int argc, char** argv) {
  ToolCommandLine command_line("moebench_project",
                               "Projected paper-scale tables from the performance models (modelled, not measured).");
  CLI::App& app = command_line.app();
  std::string out = "results", ppmoe_profile = "ppmoe-v100", m6t_profile = "m6t-v100";
  add_path(app, "--out", out, "Results folder (default results); writes <out>/models/");
  add_path(app, "--ppmoe-profile", ppmoe_profile, "Hardware profile for 000's tables (name or CSV path; default ppmoe-v100)");
  add_path(app, "--m6t-profile", m6t_profile, "Hardware profile for 001's table (default m6t-v100)");
  std::string adira_profile = "mpmoe-adira", valor_profile = "mpmoe-valor";
  add_path(app, "--adira-profile", adira_profile, "Hardware profile for 003's Adira (default mpmoe-adira)");
  add_path(app, "--valor-profile", valor_profile, "Hardware profile for 003's Valor (default mpmoe-valor)");
  std::string ranges = default_assumed_inputs_path();
  add_path(app, "--ranges", ranges,
           "The assumed inputs' ranges for models/sensitivity.csv (default models/assumption_ranges.csv)");
  std::string local_profile, local_results;
  add_path(app, "--local-profile", local_profile,
           "This machine's profile (moebench_profile's CSV); default <out>/models/profile_this_machine.csv if it exists");
  add_path(app, "--local-results", local_results, "Results of this machine's runs to hold the model against (default <out>)");
  if (const std::optional<int> exit_code = command_line.parse(argc, argv)) return *exit_code;
  try {
    if (auto e = check_output_folder("--out", out)) throw Error(*e);
    const PaperProfiles papers{load_profile_option("--ppmoe-profile", ppmoe_profile),
                               load_profile_option("--m6t-profile", m6t_profile),
                               load_profile_option("--adira-profile", adira_profile),
                               load_profile_option("--valor-profile", valor_profile)};
    std::vector<AssumedInput> inputs;
    try {
      inputs = read_assumed_inputs(ranges);
    } catch (const Error& e) {
      throw Error("--ranges: " + std::string(e.what()));
    }
    write_projections(project_papers(papers), out + "/models", true);
    {
      const std::string scratch =
          (std::filesystem::temp_directory_path() / ("moebench-sensitivity-" + std::to_string(getpid()))).string();
      const ProjectedTable s = assumption_sensitivity(papers, inputs, read_claim_specs(reference_dir() + "/claims.csv"), scratch);
      Provenance p = model_provenance(papers.ppmoe, 1, "paper", "fp16");
      p.device = "the papers' profiles (models/profiles), each assumed input across its range (models/assumption_ranges.csv)";
      p.ranks = "-";
      p.link = "-";
      s.table.write(out + "/models/sensitivity.csv", p);
      for (const auto& line : s.summary) std::printf("%s\n", line.c_str());
      std::printf("wrote %s/models/sensitivity.csv\n", out.c_str());
    }
    if (local_profile.empty() && std::filesystem::exists(out + "/models/profile_this_machine.csv"))
      local_profile = out + "/models/profile_this_machine.csv";
    if (!local_profile.empty()) {
      const HardwareProfile here = load_profile_option("--local-profile", local_profile);
      const ProjectedTable local = compare_local_runs(here, local_results.empty() ? out : local_results);
      local.table.write(out + "/models/local_vs_model.csv", model_provenance(here, here.gpus_per_node, "local", "fp32"));
      for (const auto& line : local.summary) std::printf("%s\n", line.c_str());
      std::printf("wrote %s/models/local_vs_model.csv\n", out.c_str());
      const ProjectedTable eq = ppmoe_equations_local(here, local_results.empty() ? out : local_results);
      eq.table.write(out + "/models/ppmoe_eq.csv", model_provenance(here, here.gpus_per_node, "local", "fp32"));
      for (const auto& line : eq.summary) std::printf("%s\n", line.c_str());
      std::printf("wrote %s/models/ppmoe_eq.csv\n", out.c_str());
    } else {
      std::printf("no profile of this machine (run experiments/models/profile.sh): the model is not held against local runs\n");
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "moebench_project: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
