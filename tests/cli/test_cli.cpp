// The comm bench as a user runs it: bad input gets one clear line naming the option and a
// non-zero exit (on every rank), a failing rank ends a 4-rank job quickly, and a corrupted
// receive buffer is counted in #wrong and fails the run.
#include <gtest/gtest.h>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include "harness/device.h"

namespace {

struct Result {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
};

Result run(const std::string& args, int ranks = 0) {
  // mpirun refuses root without consent; 4 ranks share 2 cores.
  std::string cmd = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 ";
  if (ranks > 0) cmd += std::string(MOEBENCH_MPIEXEC) + " " + MOEBENCH_MPIEXEC_FLAGS + " -np " + std::to_string(ranks) + " ";
  // `timeout` turns a hang into a failure instead of a stuck test.
  cmd = "timeout 60 " + cmd + MOEBENCH_COMM_BIN + " " + args + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) r.output += buf.data();
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string out_dir() {
  return (std::filesystem::temp_directory_path() / ("moebench_cli_" + std::to_string(::getpid()))).string();
}

int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (auto pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1)) ++n;
  return n;
}

void expect_usage_error(const std::string& args, const std::string& option) {
  const Result r = run(args + " --out " + out_dir());
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find("error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(option), std::string::npos) << args << "\n" << r.output;
}

TEST(CommBenchCli, BadOptionsNameTheOption) {
  expect_usage_error("--backend gpu", "--backend");
  expect_usage_error("--scale huge", "--scale");
  expect_usage_error("--dtype fp8", "--dtype");
  expect_usage_error("--dtype fp16", "--dtype");  // the cpu backend is fp32 only
  expect_usage_error("--min-bytes 0", "--min-bytes");
  expect_usage_error("--min-bytes 12X", "--min-bytes");
  expect_usage_error("--min-bytes 64K --max-bytes 1K", "--max-bytes");
  expect_usage_error("--max-bytes 1024G", "--max-bytes");  // beyond this machine's memory
  expect_usage_error("--collectives all_to_all,broadcast", "--collectives");
  expect_usage_error("--iters 0", "--iters");
  expect_usage_error("--fail-rank 3", "--fail-rank");
  expect_usage_error("--no-such-option", "--no-such-option");
}

TEST(CommBenchCli, HelpListsOurOptions) {
  const Result r = run("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--max-bytes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--backend"), std::string::npos) << r.output;
}

TEST(CommBenchCli, CudaWithoutGpuIsAClearError) {
  if (moebench::Device::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  expect_usage_error("--backend cuda", "--backend cuda");
}

TEST(CommBenchCli, UsageErrorIsOneLineAndFailsEveryRank) {
  const Result r = run("--scale tiny --min-bytes 0 --out " + out_dir(), 4);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "error: --min-bytes"), 1) << r.output;
}

TEST(CommBenchCli, FailingRankEndsTheWholeJobQuickly) {
  const Result r = run("--scale tiny --fail-rank 2 --out " + out_dir(), 4);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "the job hung until timeout killed it\n" << r.output;
  EXPECT_LT(r.seconds, 30.0) << r.output;
  EXPECT_NE(r.output.find("rank 2: error: injected failure"), std::string::npos) << r.output;
}

TEST(CommBenchCli, CorruptedBufferIsCountedWrongAndFailsTheRun) {
  const Result r = run("--scale tiny --collectives all_reduce,all_to_all --max-bytes 4K --corrupt-check --out " + out_dir(), 2);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAILED"), std::string::npos) << r.output;
}

TEST(CommBenchCli, CorrectRunWritesCsvWithProvenance) {
  const std::string dir = out_dir() + "_ok";
  const Result r = run("--scale tiny --collectives all_gather --out " + dir, 2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Out of bounds values : 0 OK"), std::string::npos) << r.output;
  FILE* f = fopen((dir + "/comm/all_gather.csv").c_str(), "r");
  ASSERT_NE(f, nullptr);
  char header[512] = {};
  ASSERT_NE(fgets(header, sizeof header, f), nullptr);
  fclose(f);
  EXPECT_EQ(std::string(header).rfind("collective,size_bytes,count,time_us,algbw_GBps,busbw_GBps,wrong,backend,device", 0), 0u)
      << header;
  std::filesystem::remove_all(dir);
}

}  // namespace

// The MoE layer bench: bad layer shapes and layouts name their option on every rank.
namespace {

Result run_moe(const std::string& args, int ranks = 0) {
  std::string cmd = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 ";
  if (ranks > 0) cmd += std::string(MOEBENCH_MPIEXEC) + " -np " + std::to_string(ranks) + " ";
  cmd = "timeout 60 " + cmd + MOEBENCH_MOE_LAYER_BIN + " --scale tiny " + args + " --out " + out_dir() + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) r.output += buf.data();
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

void expect_moe_error(const std::string& args, int ranks, const std::string& option) {
  const Result r = run_moe(args, ranks);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  EXPECT_EQ(count(r.output, "error: " + option), 1) << args << "\n" << r.output;  // one line, from one rank
}

TEST(MoELayerCli, BadShapesAndLayoutsNameTheOption) {
  expect_moe_error("--experts 6 --dispatchers expert_parallel", 4, "--experts");   // E not divisible by ranks
  expect_moe_error("--experts 8 --prototypes 3", 0, "--prototypes");               // E not divisible by Z
  expect_moe_error("--experts 8 --prototypes 2 --top-k 5", 0, "--top-k");          // k > experts per prototype
  expect_moe_error("--capacity-factor 0", 0, "--capacity-factor");                 // gamma <= 0
  expect_moe_error("--capacity-factor -1.5", 0, "--capacity-factor");
  expect_moe_error("--tokens 0", 0, "--tokens");
  expect_moe_error("--tp 3 --dispatchers ppmoe", 4, "--tp");                       // TP group not dividing the world
  expect_moe_error("--expert-gemm batched", 0, "--expert-gemm");
}

TEST(MoELayerCli, DumpsLoadInNumpyAndMatchAnIndependentRecomputation) {
  const char* py = "/usr/bin/python3";
  if (std::system((std::string(py) + " -c 'import numpy' 2>/dev/null").c_str()) != 0) GTEST_SKIP() << "no numpy";
  const std::string dir = out_dir() + "_dump";
  const Result r = run_moe("--dispatchers local --top-k 2 --capacity-factor 1.0 --dump " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string check = std::string(py) + " " + MOEBENCH_SOURCE_DIR + "/tests/cli/check_dump.py " + dir + "/local/rank0_";
  EXPECT_EQ(std::system(check.c_str()), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
