// Reading this machine's results back for the models: CSVs by column name, which runs cannot be
// compared and why (missing, measured on another machine, an old file without a column), the
// link a row ran on, the shape and routing it gives.
#pragma once
#include <libfccp/csv.h>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>
#include "models/hardware_profile.h"
#include "models/step_model.h"

namespace moebench {

// A results CSV read by column name (fields trimmed, quoted as the suite writes them).
template <unsigned Columns>
using CsvIn = io::CSVReader<Columns, io::trim_chars<' '>, io::double_quote_escape<',', '"'>>;


// A provenance column (device, scale, ...) of a CSV's first row ("" where the file has none: a
// shipped profile, say).
std::string provenance_of(const std::string& path, const std::string& column);

// The local runs left out, and why; `device` and `scale` are the profile's: a run of another
// machine or scale is not compared (its sizes and regime are not the profile's).
struct NotCompared {
  std::string device, scale;
  std::vector<std::string> lines;
  void push_back(std::string why) { lines.push_back(std::move(why)); }
};

// Whether a results file is there and was measured on the profile's machine; if not, it is
// named among the runs not compared (a profile predicts the machine it was measured on only).
bool present(const std::string& path, NotCompared& missing);

// "emulated: 0.05 GB/s, 10 us" -> the profile with that link inside (and between) nodes, as
// the runtime emulates it on top of MPI: where the profile has MPI's own times of a collective,
// the later of those and the link's.
HardwareProfile with_link(HardwareProfile hw, const std::string& link);

// Whether a results CSV read with optional columns has every one of `required`; if not, it is
// named among the runs not compared.
template <unsigned Columns>
bool has_columns(const CsvIn<Columns>& in, std::initializer_list<const char*> required, const std::string& path,
                 NotCompared& missing) {
  for (const char* c : required)
    if (!in.has_column(c)) {
      missing.push_back(path + " (no column '" + c + "': re-run it)");
      return false;
    }
  return true;
}

// A run's optional measured cell of `column` ("-": not measured, `value` left empty); false,
// with the file named among those not compared, where it is no number > 0.
bool read_measured_cell(const std::string& cell, const std::string& column, const std::string& path,
                        std::optional<double>& value, NotCompared& missing);
// A run's `expert_rows_max_over_mean` cell into `l` (read_measured_cell; "-" keeps even routing).
bool read_expert_load(const std::string& cell, const std::string& path, StepLayout& l, NotCompared& missing);

}  // namespace moebench
