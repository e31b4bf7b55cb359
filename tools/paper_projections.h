// Every paper-scale projection moebench_project writes to <out>/models/, from the four papers'
// profiles: one place that lists them, so the projection and its sensitivity to the assumed
// inputs (tools/assumption_sensitivity.h) project the same tables.
#pragma once
#include <string>
#include <vector>
#include "models/hardware_profile.h"
#include "tools/projection.h"

namespace moebench {

struct PaperProfiles {
  HardwareProfile ppmoe, m6t, adira, valor;
  // The profile named `key` ("ppmoe", "m6t", "adira", "valor"); throws Error for another key.
  HardwareProfile& by_key(const std::string& key);
  const HardwareProfile& by_key(const std::string& key) const;
};

struct ProjectionFile {
  std::string file;  // relative to <out>/models/
  ProjectedTable table;
  Provenance provenance;
};

// The tables at the papers' scale: 000 Tables 1-3, 001 Table 1, 003 Figs. 10-17 and the
// parameter counts (arithmetic on the specs, no profile).
std::vector<ProjectionFile> project_papers(const PaperProfiles& p);
// Writes each file under `models_dir`; `print` echoes the summaries and the files written.
void write_projections(const std::vector<ProjectionFile>& files, const std::string& models_dir, bool print);

}  // namespace moebench
