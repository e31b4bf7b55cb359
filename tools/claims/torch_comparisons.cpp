#include "tools/claims/torch_comparisons.h"
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <vector>
#include "harness/csv.h"
#include "models/csv_rows.h"
#include "tools/claims/report.h"

namespace moebench {

namespace {

std::string or_dash(const CsvRows& t, std::size_t r, const char* column) {
  return t.has(column) && !t.cell(r, column).empty() ? t.cell(r, column) : "-";
}


bool is_number(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return !s.empty() && end != s.c_str() && *end == '\0';
}

}  // namespace

std::string torch_comparisons_section(const std::string& results,
                                      const std::function<std::string(const RunOrigin&)>& stale) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(results, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ".csv") {
      const std::string f = fs::relative(it->path(), results).string();
      if (f.rfind("cuda/lease_", 0) != 0) files.push_back(f);  // past leases' archives: not the folder's evidence
    }
  std::sort(files.begin(), files.end());
  std::ostringstream rows, missing;
  int compared = 0, stale_rows = 0;
  bool old_torch = false;
  for (const std::string& f : files) {
    const CsvRows t = CsvRows::read(results + "/" + f);
    if (!t.has("speed_vs_torch")) continue;
    for (std::size_t r = 0; r < t.size(); ++r) {
      const std::string what = t.has("dispatcher") ? "MoE layer, " + t.cell(r, "dispatcher")
                               : t.has("model")    ? "GPT step, " + t.cell(r, "model")
                                                   : f;
      const std::string ours = t.has("total_ms") ? or_dash(t, r, "total_ms") : or_dash(t, r, "ms_per_step");
      const std::string theirs = t.has("torch_ms") ? or_dash(t, r, "torch_ms") : or_dash(t, r, "torch_ms_per_step");
      const std::string version = or_dash(t, r, "torch");
      std::string variant = or_dash(t, r, "torch_variant");
      if (t.has("torch_attention") && t.cell(r, "torch_attention") != "-") variant += "; attention: " + t.cell(r, "torch_attention");
      const std::string speed = t.cell(r, "speed_vs_torch");
      if (!is_number(speed)) {
        missing << "| `" << f << "` | " << markdown_cell(what) << " | " << markdown_cell(speed) << " |\n";
        continue;
      }
      ++compared;
      std::string fresh = "-";  // this machine's rows are the results folder's own
      if (or_dash(t, r, "backend") == "cuda") {
        const std::string why = stale({or_dash(t, r, "commit"), or_dash(t, r, "date"), "cuda", or_dash(t, r, "scale")});
        fresh = why.empty() ? "of this code" : "stale: " + why;
        stale_rows += !why.empty();
      }
      const bool old = version.rfind("1.", 0) == 0;
      old_torch = old_torch || old;
      rows << "| `" << f << "` | " << markdown_cell(what) << " | " << markdown_cell(or_dash(t, r, "backend") + ", " + or_dash(t, r, "device"))
           << " | " << markdown_cell(ours) << " | " << markdown_cell(theirs) << " | **" << speed << "** | "
           << (t.has("memory_vs_torch") && is_number(t.cell(r, "memory_vs_torch")) ? t.cell(r, "memory_vs_torch") : "-")
           << " | " << markdown_cell(variant) << " | " << markdown_cell(version + (old ? " (an old baseline)" : "") + " on " +
                                                      or_dash(t, r, "torch_device"))
           << " | " << markdown_cell(or_dash(t, r, "commit")) << " | " << markdown_cell(fresh) << " |\n";
    }
  }
  std::ostringstream md;
  md << "## PyTorch beside us\n\nEvery comparison with PyTorch the results folder holds, in one convention: PyTorch's "
        "time over ours (above 1: ours is faster), and its peak memory over ours where both were measured. The variant "
        "says which PyTorch ran: each row compares ours with that one variant, and rows of different variants are not "
        "compared with each other. A GPU row is as fresh as the ledger's rule for GPU evidence allows: of the code this "
        "machine's results ran, or stale, with why.\n\n";
  if (compared == 0) {
    md << "None: no CSV here compares with PyTorch.\n\n";
  } else {
    md << "| CSV | what | ours on | ours (ms) | PyTorch (ms) | PyTorch's time / ours | PyTorch's memory / ours | "
          "PyTorch's variant | PyTorch | commit | GPU row |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
       << rows.str() << "\n";
    if (stale_rows)
      md << stale_rows << " GPU row(s) above are stale: they measured code that has changed since, and say how ours "
         << "compared then, not now.\n\n";
  }
  if (old_torch)
    md << "PyTorch 1.x on the CPU is Debian's (python3-torch), an old and CPU-only baseline: its ratios say how our CPU "
          "code compares with it, not with a current PyTorch.\n\n";
  if (!missing.str().empty())
    md << "Rows where no PyTorch comparison could be made, and why:\n\n| CSV | what | why |\n|---|---|---|\n"
       << missing.str() << "\n";
  return md.str();
}

}  // namespace moebench
