#include "harness/torch_reference.h"
#include <filesystem>
#include "models/csv_rows.h"

namespace moebench {

const std::string& TorchRun::cell(const std::string& column) const {
  const auto it = cells.find(column);
  if (it == cells.end()) throw Error("PyTorch's CSV has no column " + column);
  return it->second;
}

std::optional<std::string> read_torch_csv(const TorchCsv& spec, DType dtype, const OtherRun& other_run,
                                          std::map<std::string, TorchRun>* fastest) {
  if (!std::filesystem::is_regular_file(spec.path)) return "--reference: " + spec.path + " is not a file";
  try {
    const CsvRows t = CsvRows::read(spec.path);
    for (std::size_t r = 0; r < t.size(); ++r) {
      TorchRun row;
      for (const std::string& c : t.columns()) row.cells[c] = t.cell(r, c);
      if (auto why = other_run(row)) return "--reference: " + spec.path + " is " + *why;
      const std::string& math = row.cell("math");
      const std::string ours(dtype_name(dtype));
      if (math.rfind(ours, 0) != 0) return "--reference: " + spec.path + " was measured in " + math + ", not " + ours + spec.dtype_hint;
      if (row.cell("status") != "ok") continue;
      row.variant = row.cell("variant");
      row.torch = row.cell("torch");
      row.device = row.cell("torch_device");
      row.math = math;
      row.ms = std::stod(row.cell(spec.ms_column));
      row.ms_min = std::stod(row.cell(spec.ms_column + "_min"));
      row.ms_max = std::stod(row.cell(spec.ms_column + "_max"));
      TorchRun& best = (*fastest)[spec.group_column.empty() ? std::string() : row.cell(spec.group_column)];
      if (best.ms == 0 || row.ms < best.ms) best = std::move(row);
    }
  } catch (const std::exception& e) {
    return "--reference: " + std::string(e.what());
  }
  return std::nullopt;
}

}  // namespace moebench
