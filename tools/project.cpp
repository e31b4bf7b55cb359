// moebench_project: the papers' tables as the performance models project them, beside the
// papers' values (000 Tables 1-3 on the 000 cluster, 001 Table 1 on the 001 machine), each row
// labelled as modelled with the profile it used. Writes <out>/models/*.csv.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include "harness/options.h"
#include "harness/output_check.h"
#include "tools/mpmoe_projection.h"
#include "tools/local_comparison.h"
#include "tools/projection.h"

using namespace moebench;

int main(int argc, char** argv) {
  CLI::App app{"Projected paper-scale tables from the performance models (modelled, not measured)."};
  std::string out = "results", ppmoe_profile = "ppmoe-v100", m6t_profile = "m6t-v100";
  add_path(app, "--out", out, "Results folder (default results); writes <out>/models/");
  add_path(app, "--ppmoe-profile", ppmoe_profile, "Hardware profile for 000's tables (name or CSV path; default ppmoe-v100)");
  add_path(app, "--m6t-profile", m6t_profile, "Hardware profile for 001's table (default m6t-v100)");
  std::string adira_profile = "mpmoe-adira", valor_profile = "mpmoe-valor";
  add_path(app, "--adira-profile", adira_profile, "Hardware profile for 003's Adira (default mpmoe-adira)");
  add_path(app, "--valor-profile", valor_profile, "Hardware profile for 003's Valor (default mpmoe-valor)");
  std::string local_profile, local_results;
  add_path(app, "--local-profile", local_profile,
           "This machine's profile (moebench_profile's CSV); default <out>/models/profile_this_machine.csv if it exists");
  add_path(app, "--local-results", local_results, "Results of this machine's runs to hold the model against (default <out>)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "moebench_project: error: %s\n", usage_message(e, app).c_str());
    return 2;
  }
  try {
    if (auto e = check_output_folder("--out", out)) throw Error(*e);
    const HardwareProfile ppmoe = load_profile_option("--ppmoe-profile", ppmoe_profile);
    const HardwareProfile m6t = load_profile_option("--m6t-profile", m6t_profile);
    const HardwareProfile adira = load_profile_option("--adira-profile", adira_profile);
    const HardwareProfile valor = load_profile_option("--valor-profile", valor_profile);
    struct Job {
      const char* file;
      ProjectedTable table;
      const HardwareProfile& hw;
      int gpus;
    };
    Job jobs[] = {{"ppmoe_t1.csv", project_ppmoe_t1(ppmoe), ppmoe, 256},
                  {"ppmoe_t2.csv", project_ppmoe_t2(ppmoe), ppmoe, 256},
                  {"ppmoe_t2_orderings.csv", project_ppmoe_t2_orderings(ppmoe), ppmoe, 256},
                  {"ppmoe_t3.csv", project_ppmoe_t3(ppmoe), ppmoe, 32},
                  {"m6t_t1.csv", project_m6t_t1(m6t), m6t, 8},
                  {"mpmoe_f10.csv", project_mpmoe_f10(adira, "Adira", 64), adira, 64},
                  {"mpmoe_f10_valor.csv", project_mpmoe_f10(valor, "Valor", 16), valor, 16},
                  {"mpmoe_f11.csv", project_mpmoe_f11(adira), adira, 64},
                  {"mpmoe_f14.csv", project_mpmoe_f14(adira), adira, 64},
                  {"mpmoe_f15.csv", project_mpmoe_f15(adira), adira, 64},
                  {"mpmoe_f17.csv", project_mpmoe_f17(adira), adira, 64}};
    {  // arithmetic on the specs: no hardware behind it
      Provenance p = model_provenance(ppmoe, 1, "paper", "-");
      p.device = "none (arithmetic on models/'s specs)";
      p.link = "-";
      p.ranks = "-";
      const ProjectedTable counts = project_parameter_counts();
      counts.table.write(out + "/models/param_counts.csv", p);
      for (const auto& line : counts.summary) std::printf("%s\n", line.c_str());
      std::printf("wrote %s/models/param_counts.csv\n", out.c_str());
    }
    if (local_profile.empty() && std::filesystem::exists(out + "/models/profile_this_machine.csv"))
      local_profile = out + "/models/profile_this_machine.csv";
    for (auto& j : jobs) {
      j.table.table.write(out + "/models/" + j.file, model_provenance(j.hw, j.gpus, "paper", "fp16"));
      for (const auto& line : j.table.summary) std::printf("%s\n", line.c_str());
      std::printf("wrote %s/models/%s\n", out.c_str(), j.file);
    }
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
