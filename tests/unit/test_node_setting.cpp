// The two-level network as a setting of the ledger (tools/claims/node_setting.h): a claim that
// rests on the split between nodes is judged only from a run over several nodes; where the nodes
// could not be made its line says "not measured here" with the reason; and the runs at half and
// at twice the link's rate give the sensitivity of each such verdict.
#include <gtest/gtest.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include "kernels/exec.h"  // Error
#include "tools/claims/ledger.h"
#include "tools/claims/node_setting.h"

namespace moebench {
namespace {

namespace fs = std::filesystem;

class NodeSetting : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() / ("moebench_nodes_" + std::to_string(::getpid()));
    for (const char* d : {"nodes/x", "nodes_half/x", "nodes_twice/x"}) fs::create_directories(root / d);
  }
  void TearDown() override { fs::remove_all(root); }
  // One row of a ratio with its range, run on `nodes` hosts.
  void run(const std::string& folder, double v, double lo, double hi, const std::string& nodes) {
    std::ofstream(root / folder / "x/r.csv")
        << "ratio,ratio_min,ratio_max,backend,device,ranks,nodes,hosts,link,scale,commit,date\n"
        << v << "," << lo << "," << hi << ",cpu,X,4," << nodes << ",a b,\"measured: MPI on 2 nodes; TCP\",local,abc,"
        << "2026-12-01T00:00:00Z\n";
  }
  void setting(const std::string& status) {
    std::ofstream(root / "nodes/setting.csv") << "status,rate_rule,gemm_flops_per_rank,flop_per_byte,rate_GBps,"
                                                 "half_rate_GBps,twice_rate_GBps\n\""
                                              << status << "\",rule,5e10,1e4,0.005,0.0025,0.01\n";
  }
  ClaimSpec spec() const {
    ClaimSpec c;
    c.id = "x.claim";
    c.quantity = "relative";
    c.paper_value = "1.5";
    c.unit = "x";
    c.judge = "match:15";
    c.baseline = "1";
    c.local = "value(nodes/x/r.csv[].ratio)";
    c.relevant_hardware = "nodes";
    return c;
  }
  ClaimResult judged() { return judge_claims({spec()}, root.string(), root.string()).at(0); }
  fs::path root;
};

TEST_F(NodeSetting, AClaimOnTheSplitBetweenNodesIsJudgedFromSeveralNodesOnly) {
  setting("measured");
  run("nodes", 1.5, 1.45, 1.55, "2");
  EXPECT_EQ(judged().verdict, "reproduced");
  run("nodes", 1.5, 1.45, 1.55, "1");
  const ClaimResult flat = judged();
  EXPECT_EQ(flat.verdict, kOffHardware);
  EXPECT_NE(flat.why.find("split between a node's fast links and the slower network"), std::string::npos) << flat.why;
  ClaimSpec both = spec();
  both.relevant_hardware = "nodes+tpu";
  run("nodes", 1.5, 1.45, 1.55, "2");
  EXPECT_THROW(judge_claims({both}, root.string(), root.string()), Error);  // every kind is checked
}

TEST_F(NodeSetting, NodesThatCouldNotBeMadeSayWhy) {
  setting("not measured here: two namespaced nodes could not be made (the kernel refuses namespaces)");
  const ClaimResult c = judged();
  EXPECT_EQ(c.verdict, "not measurable here");
  EXPECT_EQ(c.why, "not measured here: two namespaced nodes could not be made (the kernel refuses namespaces)");
  fs::remove(root / "nodes/setting.csv");
  EXPECT_NE(judged().why.find("not measured here: no run over two nodes"), std::string::npos) << judged().why;
  EXPECT_NE(node_setting_section({spec()}, root.string()).find("not measured here"), std::string::npos);
}

TEST_F(NodeSetting, TheRateDecidesWhatTheSensitivityRunsShow) {
  setting("measured");
  run("nodes", 1.5, 1.45, 1.55, "2");
  run("nodes_half", 2.5, 2.4, 2.6, "2");
  run("nodes_twice", 1.1, 0.95, 1.2, "2");  // through 1, and reaching the partly band of 1.5: noise
  const std::vector<RateSensitivity> rows = rate_sensitivity({spec()}, root.string());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].rate[0], "0.0025");
  EXPECT_EQ(rows[0].verdict[0], "not reproduced");
  EXPECT_EQ(rows[0].verdict[1], "reproduced");
  EXPECT_EQ(rows[0].verdict[2], "noise");
  const std::string md = node_setting_section({spec()}, root.string());
  EXPECT_NE(md.find("| x.claim | 2.5, not reproduced | 1.5, reproduced | 1.1, noise |"), std::string::npos) << md;
}

}  // namespace
}  // namespace moebench
