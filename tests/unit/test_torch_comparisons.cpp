// REPORT.md's "PyTorch beside us": one row per comparison, in PyTorch's time over ours, and a GPU
// row held to the ledger's rule for GPU evidence (of this code, or stale with why); this machine's
// rows are the results folder's own.
#include <gtest/gtest.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include "tools/claims/torch_comparisons.h"

namespace moebench {
namespace {

namespace fs = std::filesystem;

TEST(TorchComparisons, AGpuRowSaysWhetherItIsOfThisCode) {
  const fs::path root = fs::temp_directory_path() / ("moebench_torch_rows_" + std::to_string(::getpid()));
  fs::create_directories(root / "cuda/moe");
  fs::create_directories(root / "moe");
  const char* header = "dispatcher,total_ms,torch_ms,speed_vs_torch,torch,torch_variant,torch_device,backend,device,scale,commit,date\n";
  std::ofstream(root / "cuda/moe/layer.csv") << header
      << "local,1.5,3.0,2.0,2.11.0,grouped_mm,NVIDIA H200,cuda,NVIDIA H200,paper,abc1234,2026-12-01T00:00:00Z\n";
  std::ofstream(root / "moe/layer.csv") << header << "local,10,12,1.2,1.13.0a0,loop,cpu,cpu,AMD EPYC,local,def5678,2026-12-02T00:00:00Z\n";
  RunOrigin asked;
  const std::string stale = torch_comparisons_section(root.string(), [&](const RunOrigin& gpu) {
    asked = gpu;
    return std::string("kernels/ changed");
  });
  EXPECT_EQ(asked.commit, "abc1234");  // only the GPU row is asked about, with its own provenance
  EXPECT_EQ(asked.date, "2026-12-01T00:00:00Z");
  EXPECT_NE(stale.find("| stale: kernels/ changed |"), std::string::npos) << stale;
  EXPECT_NE(stale.find("1 GPU row(s) above are stale"), std::string::npos) << stale;
  EXPECT_NE(stale.find("| def5678 | - |"), std::string::npos) << stale;  // this machine's row: no verdict
  const std::string fresh = torch_comparisons_section(root.string(), [](const RunOrigin&) { return std::string(); });
  EXPECT_NE(fresh.find("| abc1234 | of this code |"), std::string::npos) << fresh;
  EXPECT_EQ(fresh.find("are stale"), std::string::npos) << fresh;
  fs::remove_all(root);
}

}  // namespace
}  // namespace moebench
