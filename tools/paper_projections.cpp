#include "tools/paper_projections.h"
#include <cstdio>
#include "kernels/exec.h"
#include "tools/mpmoe_projection.h"

namespace moebench {

namespace {
// The papers' profiles by the keys their tables are written under.
const std::pair<const char*, HardwareProfile PaperProfiles::*> kProfileKeys[] = {
    {"ppmoe", &PaperProfiles::ppmoe}, {"m6t", &PaperProfiles::m6t}, {"adira", &PaperProfiles::adira}, {"valor", &PaperProfiles::valor}};

template <class Profiles>
auto& profile_by_key(Profiles& p, const std::string& key) {
  std::string keys;
  for (const auto& [k, member] : kProfileKeys) {
    if (key == k) return p.*member;
    keys += (keys.empty() ? "" : ", ") + std::string(k);
  }
  throw Error("no paper profile '" + key + "'; there are: " + keys);
}
}  // namespace

HardwareProfile& PaperProfiles::by_key(const std::string& key) { return profile_by_key(*this, key); }
const HardwareProfile& PaperProfiles::by_key(const std::string& key) const { return profile_by_key(*this, key); }

std::vector<ProjectionFile> project_papers(const PaperProfiles& p) {
  auto at = [](const HardwareProfile& hw, int gpus) { return model_provenance(hw, gpus, "paper", "fp16"); };
  Provenance counts = model_provenance(p.ppmoe, 1, "paper", "-");  // arithmetic on the specs: no hardware behind it
  counts.device = "none (arithmetic on models/'s specs)";
  counts.link = counts.ranks = std::string(1, '-');  // not a literal: GCC 12 misreads its copy (-Wrestrict)
  std::vector<ProjectionFile> v;
  v.push_back({"param_counts.csv", project_parameter_counts(), counts});
  v.push_back({"m6t_flops.csv", project_m6t_layer_flops(), counts});
  v.push_back({"ppmoe_t1.csv", project_ppmoe_t1(p.ppmoe), at(p.ppmoe, 256)});
  v.push_back({"ppmoe_t2.csv", project_ppmoe_t2(p.ppmoe), at(p.ppmoe, 256)});
  v.push_back({"ppmoe_t2_orderings.csv", project_ppmoe_t2_orderings(p.ppmoe), at(p.ppmoe, 256)});
  v.push_back({"ppmoe_t3.csv", project_ppmoe_t3(p.ppmoe), at(p.ppmoe, 32)});
  v.push_back({"m6t_t1.csv", project_m6t_t1(p.m6t), at(p.m6t, 8)});
  v.push_back({"mpmoe_f10.csv", project_mpmoe_f10(p.adira, "Adira", 64), at(p.adira, 64)});
  v.push_back({"mpmoe_f10_valor.csv", project_mpmoe_f10(p.valor, "Valor", 16), at(p.valor, 16)});
  v.push_back({"mpmoe_f11.csv", project_mpmoe_f11(p.adira), at(p.adira, 64)});
  v.push_back({"mpmoe_f14.csv", project_mpmoe_f14(p.adira), at(p.adira, 64)});
  v.push_back({"mpmoe_f15.csv", project_mpmoe_f15(p.adira), at(p.adira, 64)});
  v.push_back({"mpmoe_search.csv", project_mpmoe_search(p.adira), at(p.adira, 64)});
  v.push_back({"mpmoe_f17.csv", project_mpmoe_f17(p.adira), at(p.adira, 64)});
  return v;
}

void write_projections(const std::vector<ProjectionFile>& files, const std::string& models_dir, bool print) {
  for (const ProjectionFile& f : files) {
    f.table.table.write(models_dir + "/" + f.file, f.provenance);
    if (!print) continue;
    for (const auto& line : f.table.summary) std::printf("%s\n", line.c_str());
    std::printf("wrote %s/%s\n", models_dir.c_str(), f.file.c_str());
  }
}

}  // namespace moebench
