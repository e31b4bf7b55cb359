#include "harness/csv.h"
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include "kernels/exec.h"

namespace moebench {

const std::vector<std::string>& Provenance::columns() {
  static const std::vector<std::string> c = {"backend", "device", "driver", "cuda",   "nccl",  "ranks",  "nodes",
                                             "hosts",   "processors", "link", "dtype", "scale", "commit", "date"};
  return c;
}

std::vector<std::string> Provenance::values() const {
  return {backend, device, driver, cuda, nccl, ranks, nodes, hosts, processors, link, dtype, scale, commit, date};
}

CsvTable::CsvTable(std::vector<std::string> columns) : columns_(std::move(columns)) {}

void CsvTable::add_row(std::vector<std::string> row) {
  if (row.size() != columns_.size())
    throw Error("csv: row has " + std::to_string(row.size()) + " fields, header has " + std::to_string(columns_.size()));
  rows_.push_back(std::move(row));
}

std::string csv_escape(const std::string& f) {
  if (f.find_first_of(",\"\n\r") == std::string::npos) return f;
  std::string out = "\"";
  for (char c : f) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string fmt(double v, int significant) {
  if (!std::isfinite(v)) throw Error(std::string("a result came out ") + (std::isnan(v) ? "NaN" : "infinite") +
                                     " (diverging training or a failed measurement); it is not written as a value");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", significant, v);
  return buf;
}

std::string fmt_or_na(const std::optional<double>& v, int significant) { return v ? fmt(*v, significant) : "n/a"; }

static void append_line(std::string& out, const std::vector<std::string>& a, const std::vector<std::string>* b) {
  bool first = true;
  for (const auto& f : a) { out += (first ? "" : ","); out += csv_escape(f); first = false; }
  if (b)
    for (const auto& f : *b) { out += (first ? "" : ","); out += csv_escape(f); first = false; }
  out += "\n";
}

std::string CsvTable::to_string(const Provenance* p) const {
  if (p)
    for (const std::string& c : columns_)
      for (const std::string& pc : Provenance::columns())
        if (c == pc) throw Error("csv: column '" + c + "' is a provenance column too: a CSV names a column once");
  std::string out;
  const auto pv = p ? p->values() : std::vector<std::string>{};
  append_line(out, columns_, p ? &Provenance::columns() : nullptr);
  for (const auto& r : rows_) append_line(out, r, p ? &pv : nullptr);
  return out;
}

void CsvTable::write(const std::string& path, const Provenance& p) const { write_file_atomic(path, to_string(&p)); }

}  // namespace moebench
