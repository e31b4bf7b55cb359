// CSV tables written whole or not at all (temporary file + rename), each row ending with the
// provenance columns: which backend, device, ranks, dtype, scale and commit produced it.
#pragma once
#include <optional>
#include <string>
#include <vector>
#include "runtime/atomic_file.h"

namespace moebench {

struct Provenance {
  // nodes, hosts: how many hosts the ranks ran on, and their names in rank order ("-" for a
  // model). processors: whether each rank had a processor of its own (harness/processors.h; "-" for
  // a model). link: what communication ran over -- "measured: ..." (on several nodes, within a
  // node and between them) or "emulated: <GB/s>, <us>". device, driver: every rank's, or "mixed: ...".
  std::string backend, device, driver, cuda, nccl, ranks, nodes, hosts, processors, link, dtype, scale, commit, date;
  static const std::vector<std::string>& columns();
  std::vector<std::string> values() const;
};

class CsvTable {
 public:
  explicit CsvTable(std::vector<std::string> columns);
  // Throws Error if the row's width differs from the header's.
  void add_row(std::vector<std::string> row);
  std::size_t rows() const { return rows_.size(); }
  const std::vector<std::string>& columns() const { return columns_; }
  std::string to_string(const Provenance* provenance) const;
  // Creates parent folders, writes `path`.tmp.<pid>, flushes, renames over `path`.
  void write(const std::string& path, const Provenance& provenance) const;

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

std::string csv_escape(const std::string& field);
// A decimal of `significant` digits. Throws Error for NaN or infinity: a measured value that is
// not a number is a failure to report, never a blank field.
std::string fmt(double v, int significant = 6);
// A value that may legitimately be absent (a paper that gives none): "n/a" then.
std::string fmt_or_na(const std::optional<double>& v, int significant = 6);

}  // namespace moebench
