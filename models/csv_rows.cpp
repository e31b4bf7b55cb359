#include "models/csv_rows.h"
#include <fstream>
#include "kernels/exec.h"

namespace moebench {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  return fields;
}

CsvRows CsvRows::read(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read " + path);
  CsvRows t;
  t.path_ = path;
  std::string line;
  if (!std::getline(in, line)) throw Error(path + ": empty (no header)");
  t.columns_ = split_csv_line(line);
  for (std::size_t n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    std::vector<std::string> row = split_csv_line(line);
    if (row.size() != t.columns_.size())
      throw Error(path + ":" + std::to_string(n) + ": " + std::to_string(row.size()) + " fields, the header has " +
                  std::to_string(t.columns_.size()));
    t.rows_.push_back(std::move(row));
  }
  return t;
}

std::optional<std::size_t> CsvRows::index(const std::string& column) const {
  for (std::size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i] == column) return i;
  return std::nullopt;
}

const std::string& CsvRows::cell(std::size_t r, const std::string& column) const {
  const auto i = index(column);
  if (!i) throw Error(label() + ": no column '" + column + "'");
  return rows_.at(r)[*i];
}

}  // namespace moebench
