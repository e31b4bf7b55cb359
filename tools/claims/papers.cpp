#include "tools/claims/papers.h"
#include <set>
#include "kernels/exec.h"
#include "models/csv_rows.h"

namespace moebench {

std::vector<Paper> read_papers(const std::string& path) {
  const CsvRows t = CsvRows::read(path);
  for (const char* column : {"key", "name", "title", "anchor", "page", "covers"})
    if (!t.has(column)) throw Error(path + ": no column '" + column + "'");
  std::vector<Paper> out;
  std::set<std::string> keys;
  for (std::size_t r = 0; r < t.size(); ++r) {
    Paper p{t.cell(r, "key"), t.cell(r, "name"), t.cell(r, "title"), t.cell(r, "anchor"), t.cell(r, "page"), t.cell(r, "covers")};
    for (const std::string* cell : {&p.key, &p.name, &p.title, &p.anchor, &p.page, &p.covers})
      if (cell->empty()) throw Error(path + ": row " + std::to_string(r + 1) + " has an empty cell");
    if (!keys.insert(p.key).second) throw Error(path + ": paper '" + p.key + "' is listed twice");
    out.push_back(p);
  }
  if (out.empty()) throw Error(path + ": no paper");
  return out;
}

}  // namespace moebench
