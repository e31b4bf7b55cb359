#include "tools/local_results.h"
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace moebench {

std::string provenance_of(const std::string& path, const std::string& column) {
  CsvIn<1> in(path);
  in.read_header(io::ignore_extra_column | io::ignore_missing_column, column);
  if (!in.has_column(column)) return "";
  std::string value;
  return in.read_row(value) ? value : "";
}

bool present(const std::string& path, NotCompared& missing) {
  if (!std::filesystem::exists(path)) {
    missing.push_back(path + " (no such file)");
    return false;
  }
  const std::string ran_on = provenance_of(path, "device");
  if (!missing.device.empty() && !ran_on.empty() && ran_on != missing.device) {
    missing.push_back(path + " (measured on " + ran_on + "; the profile is of " + missing.device + ")");
    return false;
  }
  const std::string scale = provenance_of(path, "scale");
  if (!missing.scale.empty() && !scale.empty() && scale != missing.scale) {
    missing.push_back(path + " (a " + scale + "-scale run; the profile was measured at the " + missing.scale + " scale)");
    return false;
  }
  return true;
}

HardwareProfile with_link(HardwareProfile hw, const std::string& link) {
  double bw = 0, us = 0;
  if (std::sscanf(link.c_str(), "emulated: %lf GB/s, %lf us", &bw, &us) == 2) {
    hw.intra_bw = hw.inter_bw = bw * 1e9;
    hw.intra_latency = hw.inter_latency = us * 1e-6;
    hw.emulated_link = HardwareProfile::EmulatedLink{us * 1e-6, bw * 1e9};
  }
  return hw;
}

bool read_measured_cell(const std::string& cell, const std::string& column, const std::string& path,
                        std::optional<double>& value, NotCompared& missing) {
  value.reset();
  if (cell == "-") return true;
  char* end = nullptr;
  const double v = std::strtod(cell.c_str(), &end);
  if (end != cell.c_str() && *end == '\0' && v > 0) {
    value = v;
    return true;
  }
  missing.push_back(path + " (a row's " + column + " '" + cell + "' is not a number > 0)");
  return false;
}

bool read_expert_load(const std::string& cell, const std::string& path, StepLayout& l, NotCompared& missing) {
  std::optional<double> load;
  if (!read_measured_cell(cell, "expert_rows_max_over_mean", path, load, missing)) return false;
  if (load) l.expert_load = *load;
  return true;
}

}  // namespace moebench
