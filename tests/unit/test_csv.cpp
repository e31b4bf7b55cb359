#include <gtest/gtest.h>
#include <libfccp/csv.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include "harness/csv.h"
#include "kernels/exec.h"

namespace moebench {
namespace fs = std::filesystem;

static fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("moebench_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

static Provenance sample_provenance() {
  Provenance p;
  p.backend = "cpu"; p.device = "Test CPU, 2 cores"; p.driver = "-"; p.cuda = "-"; p.nccl = "-";
  p.ranks = "4"; p.dtype = "fp32"; p.scale = "tiny"; p.commit = "abc123"; p.date = "2026-11-22T00:00:00Z";
  return p;
}

TEST(Csv, WritesHeaderRowsAndProvenanceReadableByFccp) {
  const fs::path dir = temp_dir("csv");
  CsvTable t({"collective", "size_bytes", "time_us"});
  t.add_row({"all_reduce", "1024", "12.5"});
  t.add_row({"all_to_all", "2048", "30"});
  const std::string path = (dir / "sub" / "x.csv").string();
  t.write(path, sample_provenance());

  io::CSVReader<5, io::trim_chars<' '>, io::double_quote_escape<',', '"'>> in(path);
  in.read_header(io::ignore_extra_column, "collective", "size_bytes", "time_us", "device", "ranks");
  std::string coll, device;
  long size = 0;
  double us = 0;
  int ranks = 0;
  ASSERT_TRUE(in.read_row(coll, size, us, device, ranks));
  EXPECT_EQ(coll, "all_reduce");
  EXPECT_EQ(size, 1024);
  EXPECT_DOUBLE_EQ(us, 12.5);
  EXPECT_EQ(device, "Test CPU, 2 cores");  // quoted because of the comma
  EXPECT_EQ(ranks, 4);
  ASSERT_TRUE(in.read_row(coll, size, us, device, ranks));
  EXPECT_EQ(coll, "all_to_all");
  EXPECT_FALSE(in.read_row(coll, size, us, device, ranks));
  fs::remove_all(dir);
}

TEST(Csv, RowWidthMustMatchHeader) {
  CsvTable t({"a", "b"});
  EXPECT_THROW(t.add_row({"1"}), Error);
  EXPECT_THROW(t.add_row({"1", "2", "3"}), Error);
}

// A column the provenance also writes (ranks, device, ...) would stand twice in the file.
TEST(Csv, AColumnNamedLikeAProvenanceColumnIsRefused) {
  CsvTable t({"model", "ranks"});
  t.add_row({"a", "4"});
  Provenance p;
  EXPECT_THROW(t.to_string(&p), Error);
  EXPECT_NO_THROW(t.to_string(nullptr));
}

TEST(Csv, EscapesQuotesAndCommas) {
  EXPECT_EQ(csv_escape("plain"), "plain");
  EXPECT_EQ(csv_escape("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_escape("say \"hi\""), "\"say \"\"hi\"\"\"");
}

TEST(Csv, FailedWriteLeavesTheOldFileWhole) {
  const fs::path dir = temp_dir("atomic");
  const std::string path = (dir / "r.csv").string();
  write_file_atomic(path, "old,contents\n1,2\n");
  // A read-only folder makes the temporary file impossible to create (root ignores modes,
  // so a folder in place of the temporary path is the portable failure).
  fs::create_directories(path + ".tmp." + std::to_string(::getpid()));
  EXPECT_THROW(write_file_atomic(path, "new\n"), Error);
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(all, "old,contents\n1,2\n");
  // No temporary file is left next to the target after a successful write either.
  fs::remove_all(path + ".tmp." + std::to_string(::getpid()));
  write_file_atomic(path, "new\n");
  int files = 0;
  for (auto& e : fs::directory_iterator(dir)) { (void)e; ++files; }
  EXPECT_EQ(files, 1);
  fs::remove_all(dir);
}

TEST(Csv, FormatsNumbersAndRefusesNonFiniteResults) {
  EXPECT_EQ(fmt(0.5), "0.5");
  EXPECT_EQ(fmt(1234567.0, 15), "1234567");
  // A measured NaN (a diverging run) is an error, never a blank field.
  EXPECT_THROW(fmt(std::nan("")), Error);
  EXPECT_THROW(fmt(INFINITY), Error);
  EXPECT_EQ(fmt_or_na(std::nullopt), "n/a");
  EXPECT_EQ(fmt_or_na(2.5), "2.5");
}

}  // namespace moebench
