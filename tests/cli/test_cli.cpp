// The comm bench as a user runs it: bad input gets one clear line naming the option and a
// non-zero exit (on every rank), a failing rank ends a 4-rank job quickly, and a corrupted
// receive buffer is counted in #wrong and fails the run.
#include <gtest/gtest.h>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>
#include <string>
#include <sys/wait.h>
#include <libfccp/csv.h>
#include "runtime/device.h"

namespace {

struct Result {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
};

// Runs a shell command, with its output and exit code.
Result run_command(const std::string& cmd) {
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

Result run(const std::string& args, int ranks = 0) {
  // mpirun refuses root without consent; 4 ranks share 2 cores.
  std::string cmd = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 ";
  if (ranks > 0) cmd += std::string(MOEBENCH_MPIEXEC) + " " + MOEBENCH_MPIEXEC_FLAGS + " -np " + std::to_string(ranks) + " ";
  // `timeout` turns a hang into a failure instead of a stuck test.
  return run_command("timeout 60 " + cmd + MOEBENCH_COMM_BIN + " " + args + " 2>&1");
}

std::string out_dir() {
  return (std::filesystem::temp_directory_path() / ("moebench_cli_" + std::to_string(::getpid()))).string();
}

// The runs that write into out_dir() itself leave their CSVs there: removed when the tests end.
struct RemoveOutDir : ::testing::Environment {
  void TearDown() override { std::filesystem::remove_all(out_dir()); }
};
::testing::Environment* const kRemoveOutDir = ::testing::AddGlobalTestEnvironment(new RemoveOutDir);

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

// The job failed, ended by itself (not by `timeout`) within `seconds`, and said `message`.
void expect_job_ended(const Result& r, double seconds, const std::string& message) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "the job hung until timeout killed it\n" << r.output;
  EXPECT_LT(r.seconds, seconds) << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
}

TEST(CommBenchCli, FailingRankEndsTheWholeJobQuickly) {
  expect_job_ended(run("--scale tiny --fail-rank 2 --out " + out_dir(), 4), 30.0, "rank 2: error: injected failure");
}

// The failing rank leaves a send in flight that no peer receives, as a kernel left waiting for a
// peer: it must say its error and end the job before its teardown waits for that send, not leave
// the job to its watchdog at --comm-timeout with its error unsaid.
TEST(CommBenchCli, AFailingRankSaysItsErrorBeforeItsTeardownWaitsForPeers) {
  expect_job_ended(run("--scale tiny --fail-rank 2 --fail-with-send-in-flight --comm-timeout 60 --out " + out_dir(), 4), 30.0,
                   "rank 2: error: injected failure");
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
  EXPECT_EQ(std::string(header).rfind("collective,size_bytes,count,time_us,time_us_min,time_us_max,algbw_GBps,busbw_GBps,"
                                     "busbw_GBps_min,busbw_GBps_max,wrong,repetitions,iterations,backend,device,driver,"
                                     "cuda,nccl,ranks,nodes,hosts,processors,link", 0), 0u)
      << header;
  std::filesystem::remove_all(dir);
}

}  // namespace

// The MoE layer bench: bad layer shapes and layouts name their option on every rank.
namespace {

Result run_moe(const std::string& args, int ranks = 0) {
  std::string cmd = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 ";
  if (ranks > 0) cmd += std::string(MOEBENCH_MPIEXEC) + " -np " + std::to_string(ranks) + " ";
  // --out first: a test's own --out comes later and wins.
  return run_command("timeout 60 " + cmd + MOEBENCH_MOE_LAYER_BIN + " --scale tiny --out " + out_dir() + " " + args + " 2>&1");
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

// Every dispatcher's dump at 4 ranks (PPMoE in two TP groups of 2), top-2 of 2 prototypes with
// dropping: check_dump.py recomputes routing, output, aux loss and every gradient with numpy.
TEST(MoELayerCli, DumpsHoldTheLayersStateAndEveryGradient) {
  const char* py = "/usr/bin/python3";
  if (std::system((std::string(py) + " -c 'import numpy' 2>/dev/null").c_str()) != 0) GTEST_SKIP() << "no numpy";
  const std::string dir = out_dir() + "_dump";
  const Result r = run_moe("--top-k 2 --prototypes 2 --capacity-factor 1.0 --tp 2 --dump " + dir, 4);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string check = std::string(py) + " " + MOEBENCH_SOURCE_DIR + "/tests/cli/check_dump.py " + dir;
  EXPECT_EQ(std::system(check.c_str()), 0);
  // The check can fail: a wrong expert gradient (as the GEMM-only timing once left) is caught.
  const std::string corrupt = std::string(py) + " -c \"import numpy as np; p='" + dir +
                              "/expert_parallel/rank1_w1_grad.npy'; a=np.load(p); a[0,0,0]+=1e-3*abs(a).max(); np.save(p,a)\"";
  ASSERT_EQ(std::system(corrupt.c_str()), 0);
  EXPECT_NE(std::system((check + " 2>/dev/null >/dev/null").c_str()), 0) << "a corrupted dW1 passed the check";
  std::filesystem::remove_all(dir);
}

// The expert-parallel layer's load statistics are over every rank's tokens, not rank 0's:
// the dropped share in the CSV equals the whole layer's, recomputed from the dumped routing.
TEST(MoELayerCli, LoadStatisticsAreOverAllRanks) {
  const char* py = "/usr/bin/python3";
  if (std::system((std::string(py) + " -c 'import numpy' 2>/dev/null").c_str()) != 0) GTEST_SKIP() << "no numpy";
  const std::string dir = out_dir() + "_load";
  const Result r = run_moe("--dispatchers expert_parallel --top-k 2 --capacity-factor 1.0 --dump " + dir + "/dump --out " + dir, 2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string check = std::string(py) + " -c \"import csv, numpy as np; d='" + dir +
                            "'; row=next(csv.DictReader(open(d+'/moe/layer_expert_parallel.csv'))); "
                            "pos=np.concatenate([np.load(d+f'/dump/expert_parallel/rank{r}_route_position.npy') for r in (0,1)]); "
                            "r0=np.load(d+'/dump/expert_parallel/rank0_route_position.npy'); "
                            "whole=(pos<0).mean(); rank0=(r0<0).mean(); got=float(row['tokens_dropped_fraction']); "
                            "assert abs(got-whole)<1e-6, (got, whole, rank0); assert abs(whole-rank0)>1e-6, 'ranks drop alike'\"";
  EXPECT_EQ(std::system(check.c_str()), 0);
  std::filesystem::remove_all(dir);
}

// A stopped rank (SIGSTOP) on the CPU backend: its peers' collective times out after
// --comm-timeout and the whole job ends, naming the rank and the operation.
// The watchdog's own account of when it fired: within the timeout plus a second.
TEST(CommBenchCli, StoppedRankEndsTheJobAfterTheCommTimeout) {
  const Result r = run("--scale tiny --stall-rank 1 --comm-timeout 2 --out " + out_dir(), 2);
  const std::string message = "rank 0: error: all_to_all (mpi) did not complete within 2 s (--comm-timeout; ended after ";
  expect_job_ended(r, 20.0, message);
  const auto at = r.output.find(message);
  if (at == std::string::npos) return;
  const double fired = std::stod(r.output.substr(at + message.size()));
  EXPECT_GE(fired, 2.0) << r.output;
  EXPECT_LT(fired, 3.0) << "the watchdog fired late\n" << r.output;
}

// On an emulated link every operation takes at least latency + bus bytes / bandwidth, so the comm
// bench never reports more than the set bandwidth (how close it gets at large sizes is a
// measurement: results/comm_emulated/, from experiments/comm/emulated.sh); every row says the
// link was emulated, with its figures.
TEST(CommBenchCli, EmulatedLinkGivesItsBandwidthAndIsLabelled) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a bandwidth figure under ThreadSanitizer's slowdown means nothing";
#endif
  const std::string dir = out_dir() + "_link";
  const Result r = run("--scale tiny --collectives all_reduce,all_to_all,all_gather --min-bytes 4M --max-bytes 4M "
                       "--link-bandwidth 0.2 --link-latency 10 --repetitions 3 --iters 2 --out " + dir, 2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* c : {"all_reduce", "all_to_all", "all_gather"}) {
    io::CSVReader<2, io::trim_chars<' '>, io::double_quote_escape<',', '"'>> in(dir + "/comm/" + c + ".csv");
    in.read_header(io::ignore_extra_column, "busbw_GBps", "link");
    double busbw = 0;
    std::string link;
    ASSERT_TRUE(in.read_row(busbw, link)) << c;
    EXPECT_LE(busbw, 0.2 * 1.01) << c;  // the emulated floor holds
    // and the bench's figure is the link's, not wildly off it. Each operation's own wait is bounded
    // within 1/0.9 of latency + bytes / bandwidth by EmulatedLinkOps; here the ranks' copies and
    // sums run beside the rest of the test command, which can slow them well past the link's time.
    EXPECT_GE(busbw, 0.2 * 0.4) << c;
    EXPECT_EQ(link, "emulated: 0.2 GB/s, 10 us") << c;
  }
  std::filesystem::remove_all(dir);
}

// A killed write leaves <file>.tmp.<pid>; the next run removes it (the pid is gone).
TEST(CommBenchCli, StaleTemporaryFilesAreRemovedAtStart) {
  const std::string dir = out_dir() + "_stale";
  std::filesystem::create_directories(dir + "/comm");
  const std::string stale = dir + "/comm/all_gather.csv.tmp.999999999";
  { FILE* f = fopen(stale.c_str(), "w"); ASSERT_NE(f, nullptr); fputs("half a csv", f); fclose(f); }
  const Result r = run("--scale tiny --collectives all_gather --out " + dir, 1);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(dir + "/comm/all_gather.csv"));
  std::filesystem::remove_all(dir);
}

// A training run that diverges is reported as an error naming the run and --lr, never written
// as blank or NaN fields.
TEST(CvBenchCli, DivergingTrainingIsAnErrorNotABlank) {
  const std::string dir = out_dir() + "_cv";
  const Result r = run_command(std::string("timeout 60 ") + MOEBENCH_CV_BIN +
                               " --scale tiny --optimizer sgd --lr 1e30 --out " + dir + " 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: m6t.cv: training diverged at step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lower --lr"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/m6t/cv.csv"));
  std::filesystem::remove_all(dir);
}

// The papers' values come from experiments/reference/ of the checkout the binary sits in
// (<checkout>/build/bench/ -> <checkout>/experiments/reference/), not from the source path it was
// built from: a moved checkout reads its own. A copy of the binary in a fake checkout whose
// values.csv gives M6-T Table 1 other numbers shows it.
TEST(GatingBenchCli, ReferenceValuesFollowTheBinarysCheckout) {
  namespace fs = std::filesystem;
  const fs::path root = out_dir() + "_moved_checkout";
  fs::remove_all(root);
  fs::create_directories(root / "build" / "bench");
  fs::create_directories(root / "experiments" / "reference");
  fs::copy_file(MOEBENCH_GATING_BIN, root / "build" / "bench" / "moebench_m6t_gating");
  {
    std::ifstream in(std::string(MOEBENCH_SOURCE_DIR) + "/experiments/reference/values.csv");
    std::ofstream out(root / "experiments" / "reference" / "values.csv");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("001.t1.3layer.top1,", 0) == 0) line.replace(line.find(",98,"), 4, ",100,");
      if (line.rfind("001.t1.3layer.top16,", 0) == 0) line.replace(line.find(",600,"), 5, ",700,");
      out << line << "\n";
    }
  }
  const Result r = run_command("timeout 60 " + (root / "build" / "bench" / "moebench_m6t_gating").string() +
                               " --scale tiny --repetitions 1 --out " + (root / "results").string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string& output = r.output;
  std::array<char, 4096> buf{};
  FILE* f = fopen((root / "results" / "m6t" / "gating.csv").c_str(), "r");
  ASSERT_NE(f, nullptr) << output;
  std::string csv;
  while (fgets(buf.data(), buf.size(), f)) csv += buf.data();
  fclose(f);
  EXPECT_NE(csv.find(",top16,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",700,7,"), std::string::npos) << "top-16 paper ms/step and its ratio to top-1 from the moved table\n" << csv;
  fs::remove_all(root);
}

// The NVTX ranges a run pushes (recorded by NVTX's injection hook, as Nsight would see them) are
// exactly the CSV's breakdown columns, and every push is popped at the same depth.
TEST(MoELayerCli, NvtxRangesAreTheCsvColumnsAndNest) {
#ifndef MOEBENCH_NVTX_RECORDER
  GTEST_SKIP() << "built without NVTX";
#else
  const std::string dir = out_dir() + "_nvtx";
  std::filesystem::create_directories(dir);
  const std::string record = dir + "/ranges.txt";
  const std::string cmd = std::string("env NVTX_INJECTION64_PATH=") + MOEBENCH_NVTX_RECORDER + " MOEBENCH_NVTX_RECORD=" +
                          record + " timeout 60 " + MOEBENCH_MOE_LAYER_BIN +
                          " --scale tiny --dispatchers local --repetitions 1 --iters 2 --out " + dir + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::set<std::string> pushed;
  std::map<std::string, std::vector<std::string>> open;  // per thread: the stack of names
  std::ifstream in(record);
  std::string kind, thread, name;
  int depth = 0, lines = 0;
  while (in >> kind >> thread >> depth) {
    ++lines;
    auto& stack = open[thread];
    if (kind == "push") {
      in >> name;
      EXPECT_EQ(depth, int(stack.size())) << name;
      stack.push_back(name);
      pushed.insert(name);
    } else {
      ASSERT_FALSE(stack.empty()) << "a pop without a push";
      stack.pop_back();
      EXPECT_EQ(depth, int(stack.size()));
    }
  }
  EXPECT_GT(lines, 0) << "nothing recorded: the injection library did not load";
  for (const auto& [t, stack] : open) EXPECT_TRUE(stack.empty()) << "ranges left open on thread " << t;
  std::ifstream csv(dir + "/moe/layer_local.csv");
  std::string header;
  std::getline(csv, header);
  std::set<std::string> columns;
  std::stringstream cols(header);
  for (std::string c; std::getline(cols, c, ',');)
    if (c.rfind("moe.", 0) == 0 && c.size() > 3 && c.substr(c.size() - 3) == "_ms" &&
        c.find("_fastest_rank") == std::string::npos)  // a range's other view, not another range
      columns.insert(c.substr(0, c.size() - 3));
  EXPECT_EQ(pushed, columns);
  std::filesystem::remove_all(dir);
#endif
}

// --trace writes one Chrome/Perfetto trace per rank: the breakdown ranges by their CSV names and
// the communication with its bytes, on named stream tracks.
TEST(MoELayerCli, TraceHasRangesAndCommunicationPerRank) {
  const char* py = "/usr/bin/python3";
  const std::string dir = out_dir() + "_trace";
  const Result r = run_moe("--dispatchers expert_parallel --repetitions 1 --iters 1 --trace " + dir + "/trace", 2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string file = dir + "/trace/moebench_moe_layer.rank" + std::to_string(rank) + ".json";
    const std::string check = std::string(py) + " -c \"import json; t=json.load(open('" + file +
                              "')); ev=t['traceEvents']; names={e['name'] for e in ev if e['ph']=='X'}; "
                              "assert {'moe.gating','moe.dispatch','moe.expert','moe.combine','moe.sync.bwd'} <= names, names; "
                              "a2a=[e for e in ev if e.get('name')=='all_to_all_v (mpi)']; "
                              "assert a2a and all(e['args']['bus_bytes']>=0 for e in a2a), a2a; "
                              "assert any(e['ph']=='M' and e['name']=='thread_name' for e in ev)\"";
    EXPECT_EQ(std::system(check.c_str()), 0) << file;
  }
  std::filesystem::remove_all(dir);
}

// The MPMoE bench at 2 ranks: f2's activations, temporaries and communication buffers are
// explained tensor by tensor to the byte (the allocator counts bytes asked for, exactly), and a
// second run reuses the first's saved Algorithm 1 search without profiling.
Result run_mpmoe(const std::string& args, int ranks) {
  std::string cmd = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
                    "OPENBLAS_NUM_THREADS=1 ";
  cmd += std::string(MOEBENCH_MPIEXEC) + " -np " + std::to_string(ranks) + " ";
  return run_command("timeout 120 " + cmd + MOEBENCH_MPMOE_BIN + " --scale tiny " + args + " 2>&1");
}

// Rows of a CSV as column -> value, read by Python's csv module (quoted fields hold commas).
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::vector<std::map<std::string, std::string>> rows;
  const Result r = run_command("/usr/bin/python3 -c \"import csv\nfor row in csv.DictReader(open('" + path +
                               "')):\n print(chr(31).join(k+'='+v for k,v in row.items()))\"");
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    std::map<std::string, std::string> row;
    std::istringstream fields(line);
    for (std::string f; std::getline(fields, f, '\x1f');) row[f.substr(0, f.find('='))] = f.substr(f.find('=') + 1);
    rows.push_back(row);
  }
  return rows;
}

TEST(MPMoEBenchCli, MemoryIsExplainedToTheByteAndASavedSearchIsReused) {
  const std::string dir = out_dir() + "_mpmoe";
  Result r = run_mpmoe("--experiments f2,f10 --fresh-search --out " + dir, 2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto f2 = read_csv(dir + "/mpmoe/f2.csv");
  ASSERT_FALSE(f2.empty());
  for (const auto& row : f2) {
    EXPECT_EQ(row.at("rank0_act_unexplained_bytes"), "0") << row.at("tokens");
    EXPECT_EQ(row.at("rank0_tmp_unexplained_bytes"), "0") << row.at("tokens");
    EXPECT_EQ(row.at("rank0_comm_unexplained_bytes"), "0") << row.at("tokens");
    EXPECT_NE(row.at("rank0_act_T_DI_bytes"), "0");
  }
  auto f10 = read_csv(dir + "/mpmoe/f10.csv");
  ASSERT_FALSE(f10.empty());
  EXPECT_EQ(f10.front().at("pb_search"), "searched");
  EXPECT_NE(f10.front().at("pb_profiled_points"), "0");
  r = run_mpmoe("--experiments f10 --out " + dir, 2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  f10 = read_csv(dir + "/mpmoe/f10.csv");
  ASSERT_FALSE(f10.empty());
  for (const auto& row : f10) {
    EXPECT_EQ(row.at("pb_search"), "saved search reused") << row.at("tokens");
    EXPECT_EQ(row.at("pb_profiled_points"), "0") << row.at("tokens");
  }
  // Another link is another machine to the search: profiled afresh.
  r = run_mpmoe("--experiments f10 --link-bandwidth 0.5 --out " + dir, 2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  f10 = read_csv(dir + "/mpmoe/f10.csv");
  ASSERT_FALSE(f10.empty());
  EXPECT_EQ(f10.front().at("pb_search"), "searched");
  std::filesystem::remove_all(dir);
}

}  // namespace
