// A CSV read whole, by column name: the reference values (experiments/reference/) and the
// results the claim ledger reads back. Fields are strings as the file has them (quotes as the
// suite writes them: RFC 4180 double quotes); a cell is looked up by row and column name.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace moebench {

class CsvRows {
 public:
  // Throws Error naming the file when it cannot be read or a row's width differs from the header's.
  static CsvRows read(const std::string& path);
  const std::string& path() const { return path_; }
  // How messages name it: the path, or a shorter name given (a results folder's relative path).
  const std::string& label() const { return label_.empty() ? path_ : label_; }
  void set_label(std::string label) { label_ = std::move(label); }
  const std::vector<std::string>& columns() const { return columns_; }
  std::size_t size() const { return rows_.size(); }
  bool has(const std::string& column) const { return index(column).has_value(); }
  std::optional<std::size_t> index(const std::string& column) const;
  // Row r's cell of `column`; throws Error if there is no such column.
  const std::string& cell(std::size_t r, const std::string& column) const;

 private:
  std::string path_, label_;
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// The fields of one CSV line.
std::vector<std::string> split_csv_line(const std::string& line);

}  // namespace moebench
