#include "models/paper_values.h"
#include <cstdlib>
#include <filesystem>
#include <cmath>
#include "kernels/exec.h"
#include "models/csv_rows.h"

namespace moebench {

std::string reference_dir() {
  namespace fs = std::filesystem;
  if (const char* dir = std::getenv("MOEBENCH_REFERENCE"); dir && *dir) return dir;
  // The checkout the binary sits in (<checkout>/build/bench/ -> <checkout>/experiments/reference/),
  // so a moved or copied checkout reads its own numbers; else the source tree it was built from.
  const fs::path rel = fs::path("experiments") / "reference";
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path())
      if (fs::exists(dir / rel / "values.csv", ec)) return (dir / rel).string();
  return (fs::path(MOEBENCH_SOURCE_DIR) / rel).string();
}

const std::vector<PaperValue>& paper_values() {
  static const std::vector<PaperValue> values = [] {
    const CsvRows t = CsvRows::read(reference_dir() + "/values.csv");
    std::vector<PaperValue> v;
    for (std::size_t r = 0; r < t.size(); ++r) {
      PaperValue p{t.cell(r, "id"), t.cell(r, "paper"), t.cell(r, "where"), t.cell(r, "row"), t.cell(r, "column"),
                   t.cell(r, "unit"), t.cell(r, "kind"), t.cell(r, "note"), 0};
      char* end = nullptr;
      p.value = std::strtod(t.cell(r, "value").c_str(), &end);
      if (end == t.cell(r, "value").c_str() || *end != '\0' || !std::isfinite(p.value))
        throw Error(t.path() + ": " + p.id + ": value '" + t.cell(r, "value") + "' is not a number");
      v.push_back(std::move(p));
    }
    return v;
  }();
  return values;
}

const PaperValue& paper_value(const std::string& id) {
  for (const PaperValue& p : paper_values())
    if (p.id == id) return p;
  throw Error("no paper value '" + id + "' in " + reference_dir() + "/values.csv");
}

}  // namespace moebench
