// What the assumptions decide: the modelled claims re-projected across an assumed input's range
// move the way the input drives them and not where it plays no part, the scales stay at most 1,
// a bad ranges file is refused naming what is allowed, and the ledger says when a modelled
// verdict rests on an assumption.
#include <gtest/gtest.h>
#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include "kernels/exec.h"
#include "models/paper_values.h"
#include "tools/assumption_sensitivity.h"

namespace moebench {
namespace {

namespace fs = std::filesystem;

PaperProfiles shipped() {
  return {load_profile_option("p", "ppmoe-v100"), load_profile_option("p", "m6t-v100"),
          load_profile_option("p", "mpmoe-adira"), load_profile_option("p", "mpmoe-valor")};
}

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("moebench_sensitivity_" + name + "_" + std::to_string(::getpid()));
}

TEST(AssumptionSensitivity, InterNodeLatencyMovesMPMoEScalingAndNothingArithmetic) {
  const std::vector<AssumedInput> inputs = {{"adira", "inter_latency", "us", "test", 2, 20}};
  const std::vector<ClaimSpec> claims = read_claim_specs(reference_dir() + "/claims.csv");
  const fs::path dir = scratch("f17");
  const ProjectedTable t = assumption_sensitivity(shipped(), inputs, claims, dir.string());
  EXPECT_FALSE(fs::exists(dir)) << "the scratch projections are removed";
  const std::string csv = t.table.to_string(nullptr);
  const auto row_of = [&](const std::string& claim) -> std::string {
    const std::size_t at = csv.find("\n" + claim + ",");
    return at == std::string::npos ? "" : csv.substr(at + 1, csv.find('\n', at + 1) - at - 1);
  };
  const std::string f17 = row_of("003.f17.mpmoe_8_nodes");
  ASSERT_FALSE(f17.empty()) << csv;
  // claim,profile,input,unit,input_low,input_base,input_high,claim_at_low,claim_at_base,claim_at_high,...
  std::vector<std::string> cells;
  for (std::size_t a = 0, b; a <= f17.size(); a = b + 1) {
    b = f17.find(',', a);
    if (b == std::string::npos) b = f17.size();
    cells.push_back(f17.substr(a, b - a));
  }
  ASSERT_GE(cells.size(), 10u);
  EXPECT_EQ(cells[5], "10") << "Adira's assumed 10 us";
  const double low = std::stod(cells[7]), base = std::stod(cells[8]), high = std::stod(cells[9]);
  EXPECT_GT(low, base * 1.2) << "a shorter step between nodes scales 8 nodes better";
  EXPECT_LT(high, base);
  // Adira is 003's profile: 000's and 001's claims, and the specs' arithmetic, do not move.
  EXPECT_EQ(row_of("000.t2.r6.throughput"), "");
  EXPECT_EQ(row_of("001.t3.1t.params"), "");
}

TEST(AssumptionSensitivity, ScalesStayAtMostOne) {
  const HardwareProfile adira = load_profile_option("p", "mpmoe-adira");
  ASSERT_FALSE(adira.overlap_slowdown.empty());
  const HardwareProfile gemm = with_input(adira, {"adira", "gemm_efficiency", "x", "t", 0.5, 4}, 4);
  for (const auto& [flops, eff] : gemm.gemm_efficiency) EXPECT_LE(eff, 1.0);
  EXPECT_EQ(gemm.gemm_efficiency.back().second, 1.0);
  const HardwareProfile overlap = with_input(adira, {"adira", "overlap_slowdown", "x", "t", 0.8, 1.7}, 1.7);
  for (const auto& [pair, alpha] : overlap.overlap_slowdown) EXPECT_EQ(alpha, 1.0) << pair.first << "|" << pair.second;
  const HardwareProfile latency = with_input(adira, {"adira", "inter_latency", "us", "t", 2, 20}, 2);
  EXPECT_DOUBLE_EQ(latency.inter_latency, 2e-6);
  EXPECT_EQ(input_value(adira, {"adira", "inter_latency", "us", "t", 2, 20}), 10);
  EXPECT_THROW(with_input(load_profile_option("p", "ppmoe-v100"), {"ppmoe", "overlap_slowdown", "x", "t", 0.8, 1.6}, 1),
               Error);
}

TEST(AssumptionSensitivity, ABadRangesFileIsRefusedNamingWhatIsAllowed) {
  const fs::path f = scratch("ranges.csv");
  auto refused = [&](const std::string& row, const std::string& says) {
    std::ofstream(f) << "profile,input,low,high,unit,why\n" << row << "\n";
    try {
      read_assumed_inputs(f.string());
      ADD_FAILURE() << row << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused("adira,inter_latency,20,2,us,x", "0 < low < high");
  refused("adira,inter_latency,2,20,ms,x", "allowed: us");
  refused("adira,nvlink,1,2,GB/s,x", "allowed: gpus_per_node (count)");
  refused("cluster,inter_latency,2,20,us,x", "there are: ppmoe, m6t, adira, valor");
  refused("adira,inter_latency,2,20,us,", "no why");
  fs::remove(f);
  EXPECT_FALSE(read_assumed_inputs(default_assumed_inputs_path()).empty());
}

TEST(AssumptionSensitivity, TheLedgerSaysWhenAModelledVerdictRestsOnAnAssumption) {
  const fs::path root = scratch("ledger");
  fs::create_directories(root / "models");
  std::ofstream(root / "models/m.csv") << "x,device\n4.0,none\n";
  ClaimSpec s;
  s.id = "t.claim";
  s.paper = "003";
  s.quantity = "relative";
  s.paper_value = "5";
  s.judge = "match:15";
  s.model = "value(models/m.csv[].x)";
  const std::string header =
      "claim,profile,input,unit,input_low,input_base,input_high,claim_at_low,claim_at_base,claim_at_high,paper,"
      "verdict_at_low,verdict_at_base,verdict_at_high,swing,verdict_changes,input_source,range_why\n";
  std::ofstream(root / "models/sensitivity.csv")
      << header << "t.claim,adira,inter_latency,us,2,10,20,4.7,4,3,5,reproduced,partly,partly,0.4,yes,a,b\n";
  std::vector<ClaimResult> r = judge_claims({s}, root.string());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, "modelled only");
  EXPECT_TRUE(r[0].rests_on_assumption);
  EXPECT_NE(r[0].why.find("rests on an assumption: adira inter_latency from 2 to 20 us"), std::string::npos) << r[0].why;
  std::ofstream(root / "models/sensitivity.csv")
      << header << "t.claim,adira,inter_latency,us,2,10,20,4.1,4,3.9,5,partly,partly,partly,0.05,no,a,b\n";
  r = judge_claims({s}, root.string());
  EXPECT_FALSE(r[0].rests_on_assumption);
  EXPECT_NE(r[0].why.find("no assumed input changes its verdict"), std::string::npos) << r[0].why;
  std::ofstream(root / "models/sensitivity.csv") << header;
  r = judge_claims({s}, root.string());
  EXPECT_NE(r[0].model_assumptions.find("no assumed input moves it"), std::string::npos) << r[0].model_assumptions;
  fs::remove_all(root);
}

}  // namespace
}  // namespace moebench
