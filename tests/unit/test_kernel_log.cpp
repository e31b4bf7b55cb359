// The kernel log on the CPU backend: every stream op that ran while it was on, under the timed
// range its enqueuing thread was in, without the streams' events; kernel names made readable;
// the log of several runs as a table.
#include <gtest/gtest.h>
#include <chrono>
#include <map>
#include <thread>
#include "harness/kernel_table.h"
#include "runtime/device.h"
#include "runtime/inline_queue.h"
#include "runtime/kernel_log.h"
#include "runtime/range.h"

namespace moebench {
namespace {

void busy_op(const Exec& ex, const char* name, int ms) {
  run_host(ex, name, [ms] { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); });
}

TEST(KernelLog, EachOpUnderTheTimedRangeItWasEnqueuedIn) {
  Device dev = Device::open(Backend::cpu);
  const Stream s = dev.create_stream("compute"), side = dev.create_stream("side");
  busy_op(dev.exec(s), "before", 0);  // before the log: not in it
  ASSERT_EQ(KernelLog::start(Backend::cpu), "");
  EXPECT_TRUE(KernelLog::on());
  EXPECT_THROW(KernelLog::start(Backend::cpu), Error);
  Breakdown b;
  {
    ScopedRange step("step", s, &b);
    busy_op(dev.exec(s), "a", 2);
    {
      ScopedRange fwd("fwd", s, &b);
      busy_op(dev.exec(side), "b", 1);  // the host's scope, whatever the stream
      ScopedRange untimed("nvtx.only", s);  // no breakdown: not a path
      busy_op(dev.exec(s), "c", 1);
    }
    Event e(Backend::cpu);
    e.record(s);  // an event orders work; it is no op of the log
    e.make_wait(side);
  }
  busy_op(dev.exec(s), "outside", 0);
  dev.synchronize();
  EXPECT_EQ(current_range_path(), "");
  const auto records = KernelLog::stop();
  EXPECT_FALSE(KernelLog::on());
  std::map<std::string, std::string> path_of;
  for (const KernelRecord& r : records) {
    EXPECT_TRUE(path_of.emplace(r.name, r.path).second) << r.name << " twice";
    EXPECT_GE(r.ms, 0) << r.name;
  }
  EXPECT_EQ(path_of, (std::map<std::string, std::string>{{"a", "step"}, {"b", "step/fwd"}, {"c", "step/fwd"}, {"outside", ""}}));
  for (const KernelRecord& r : records) {
    if (r.name == "a") {
      EXPECT_GE(r.ms, 1.5);  // its own time on the worker
    }
  }
  EXPECT_TRUE(KernelLog::stop().empty());  // stopped: nothing more
}

// The default stream has no queue: its ops run at once on the calling thread, and are logged
// there, timed, under that thread's range; none once the log is off.
TEST(KernelLog, OpsTheDefaultStreamRunsAtOnce) {
  Device dev = Device::open(Backend::cpu);
  const Stream& s = dev.default_stream();
  ASSERT_EQ(s.queue, nullptr);
  ASSERT_EQ(dev.exec(s).queue, &inline_queue());
  ASSERT_EQ(KernelLog::start(Backend::cpu), "");
  Breakdown b;
  {
    ScopedRange layer("layer", s, &b);
    busy_op(dev.exec(s), "at_once", 2);
    run_on(s, "stream_op", [] {});
    {
      const PoolPoisoning poisoning;  // the pool's test mode marking a freed block: no op of the work
      busy_op(dev.exec(s), "poisoned", 0);
      busy_op(dev.exec(dev.create_stream("queued")), "poisoned_queued", 0);
    }
  }
  busy_op(dev.exec(s), "after", 0);
  const auto records = KernelLog::stop();
  busy_op(dev.exec(s), "stopped", 0);
  std::map<std::string, std::string> path_of;
  for (const KernelRecord& r : records) {
    EXPECT_TRUE(path_of.emplace(r.name, r.path).second) << r.name << " twice";
    if (r.name == "at_once") {
      EXPECT_GE(r.ms, 1.5);
    }
  }
  EXPECT_EQ(path_of, (std::map<std::string, std::string>{{"at_once", "layer"}, {"stream_op", "layer"}, {"after", ""}}));
  EXPECT_TRUE(KernelLog::stop().empty());
}

// Ops enqueued outside the log's runs are in no record, though the log stays on; each record
// carries the run it was enqueued in, queued or run at once.
TEST(KernelLog, OpsOutsideTheRunsAreLeftOutAndEachRecordHasItsRun) {
  Device dev = Device::open(Backend::cpu);
  const Stream& s = dev.default_stream();
  const Stream queued = dev.create_stream("queued");
  ASSERT_EQ(KernelLog::start(Backend::cpu), "");
  EXPECT_EQ(KernelLog::current_run(), 0);
  busy_op(dev.exec(s), "first", 0);
  KernelLog::set_run(KernelLog::kNoRun);
  busy_op(dev.exec(s), "between", 0);
  busy_op(dev.exec(queued), "between_queued", 0);
  dev.synchronize();
  EXPECT_TRUE(KernelLog::on());
  KernelLog::set_run(3);
  busy_op(dev.exec(queued), "third", 0);
  busy_op(dev.exec(s), "third_at_once", 0);
  dev.synchronize();
  std::map<std::string, int> run_of;
  for (const KernelRecord& r : KernelLog::stop()) EXPECT_TRUE(run_of.emplace(r.name, r.run).second) << r.name << " twice";
  EXPECT_EQ(run_of, (std::map<std::string, int>{{"first", 0}, {"third", 3}, {"third_at_once", 3}}));
  ASSERT_EQ(KernelLog::start(Backend::cpu), "");
  EXPECT_EQ(KernelLog::current_run(), 0) << "a new log begins at run 0";
  KernelLog::stop();
}

// What a timed loop does untimed ahead of each iteration (zeroing gradients) runs ahead of each
// logged run, outside the log's runs: in no run's table, and every run after its own. One run
// more than asked warms the log up, and its ops are in no table either.
TEST(KernelTable, WhatRunsBeforeEachRunAndTheWarmUpAreNotLogged) {
  Device dev = Device::open(Backend::cpu);
  const Stream& s = dev.default_stream();
  const Stream queued = dev.create_stream("queued");
  int before = 0, runs = 0;
  const KernelLogRuns log = log_kernel_runs(
      dev, 3,
      [&](Breakdown& b) {
        EXPECT_EQ(before, runs + 1) << "each run after its own before";
        ScopedRange step("step", s, &b);
        if (runs++ == 0) busy_op(dev.exec(queued), "warm_up", 0);
        busy_op(dev.exec(s), "work", 0);
      },
      [&] {
        ++before;
        busy_op(dev.exec(s), "zero_grad", 0);
      });
  ASSERT_EQ(log.failure, "");
  EXPECT_EQ(runs, 4) << "three logged runs after one that warms the log up";
  EXPECT_EQ(before, 4);
  ASSERT_EQ(log.rows.size(), 1u);
  EXPECT_EQ(log.rows[0].name, "work");
  EXPECT_EQ(log.rows[0].calls, 1);
  EXPECT_EQ(log.rows[0].ms.samples, 3);
  EXPECT_EQ(log.span_ms.samples, 3) << "the logged runs' spans, the warm-up's not among them";
  EXPECT_FALSE(KernelLog::on());
}

TEST(KernelLog, KernelNamesWithoutReturnTypeParametersOrAnonymousNamespaces) {
  EXPECT_EQ(readable_kernel_name("_ZN8moebench12_GLOBAL__N_16kernelIfEEviPKT_"), "moebench::kernel<float>");
  EXPECT_EQ(readable_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64");  // not mangled: as it is
  EXPECT_EQ(readable_kernel_name("_Z6reducePKfPfi"), "reduce");
}

TEST(KernelTable, PerPathAndKernelTheMedianRunSlowestFirst) {
  using R = KernelRecord;  // name, path, ms, start: each run's ops back to back
  const auto rows = kernel_table({{R{"gemm", "step/fwd", 2, 0}, R{"gemm", "step/fwd", 1, 2}, R{"copy", "", 1, 3}},
                                  {R{"gemm", "step/fwd", 4, 10}, R{"norm", "step/fwd", 2, 14}},
                                  {R{"gemm", "step/fwd", 2, 5}, R{"copy", "", 2, 7}, R{"norm", "step/fwd", 1, 9}}});
  ASSERT_EQ(rows.size(), 3u) << "no gap, so no idle row";
  EXPECT_EQ(rows[0].name, "gemm");  // 3, 4, 2 per run
  EXPECT_DOUBLE_EQ(rows[0].ms.median, 3);
  EXPECT_DOUBLE_EQ(rows[0].ms.min, 2);
  EXPECT_DOUBLE_EQ(rows[0].calls, 4.0 / 3);
  EXPECT_EQ(rows[1].path, kOutsideRanges);  // copy 1, 0, 2 (absent from a run: 0 there)
  EXPECT_EQ(rows[1].name, "copy");
  EXPECT_DOUBLE_EQ(rows[1].ms.median, 1);
  EXPECT_DOUBLE_EQ(rows[1].ms.min, 0);
  EXPECT_EQ(rows[2].name, "norm");  // 0, 2, 1
  EXPECT_DOUBLE_EQ(rows[2].ms.median, 1);
  EXPECT_DOUBLE_EQ(rows[0].share, 3.0 / 5);  // run spans 4, 6, 5
  Spread spans;
  kernel_table({{R{"gemm", "step/fwd", 2, 0}, R{"gemm", "step/fwd", 1, 2}, R{"copy", "", 1, 3}},
                {R{"gemm", "step/fwd", 4, 10}, R{"norm", "step/fwd", 2, 14}},
                {R{"gemm", "step/fwd", 2, 5}, R{"copy", "", 2, 7}, R{"norm", "step/fwd", 1, 9}}},
               &spans);
  EXPECT_DOUBLE_EQ(spans.median, 5);
  EXPECT_DOUBLE_EQ(spans.min, 4);
  EXPECT_DOUBLE_EQ(spans.max, 6);
  // Set against the runs measured without the log, whose host did not pay for it.
  EXPECT_EQ(logged_against_measured(KernelLogRuns{rows, "", spans}, 2.5),
            "a logged run spans 5 ms on the device [4 .. 6] against 2.5 ms measured without the log (2.00x)");
  EXPECT_EQ(logged_against_measured(KernelLogRuns{{}, "CUPTI: libcupti was not found", {}}, 2.5),
            "no kernel log: CUPTI: libcupti was not found");
  EXPECT_THROW(kernel_table({{R{"gemm", "", 1, 0}}, {}}), Error);  // a run the log missed
  EXPECT_THROW(kernel_table({}), Error);
}

// Where no op runs on any stream: a gap under the path of the op it follows, named for the path
// the next op is under when that differs. An op on another stream covers a gap it overlaps, and
// the order the records arrive in is not their order on the device.
TEST(KernelTable, WhereTheDeviceRanNoOpIsARowUnderThePathItFollows) {
  using R = KernelRecord;
  const auto rows = kernel_table({{R{"topk", "gate", 1, 3},     // 2 idle before it, in its own path
                                   R{"gemm", "gate", 1, 0},     //
                                   R{"copy", "gate", 1, 4},     // the counts, then the host's wait: 3
                                   R{"pad", "dispatch", 1, 8},  //
                                   R{"w1", "expert", 4, 9},     // a long op on one stream, ...
                                   R{"side", "expert", 1, 10},  // ... one inside it on another, ...
                                   R{"w2", "expert", 1, 13}}}); // ... and the next: no gap
  auto row = [&](const std::string& path, const std::string& name) {
    for (const KernelRow& r : rows)
      if (r.path == path && r.name == name) return r.ms.median;
    ADD_FAILURE() << "no row " << path << " / " << name;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(row("gate", kIdle), 2);
  EXPECT_DOUBLE_EQ(row("gate", idle_until("dispatch")), 3);
  EXPECT_EQ(rows.size(), 9u) << "7 ops and the 2 gaps";
  EXPECT_DOUBLE_EQ(rows[0].share, 4.0 / 14) << "w1 over the span, 0 to 14";
  EXPECT_EQ(slowest_kernels(KernelLogRuns{rows, "", {}}, 2),
            "slowest kernels: w1 in expert 28.6%, pad in dispatch 7.1%; "
            "device idle 35.7%, the most (device idle until dispatch) in gate 21.4%");

  // An op whose start the log could not tell (start < 0) keeps its time and bounds no gap.
  const auto untold = kernel_table({{R{"gemm", "a", 1, 0}, R{"copy", "a", 2, -1}, R{"norm", "a", 1, 3}}});
  ASSERT_EQ(untold.size(), 4u);
  EXPECT_EQ(untold[0].name, kIdle);
  EXPECT_DOUBLE_EQ(untold[0].ms.median, 2);
  EXPECT_DOUBLE_EQ(untold[1].ms.median, 2) << "the copy";
  EXPECT_DOUBLE_EQ(untold[2].share, 1.0 / 6) << "the span, 0 to 4, and the copy's 2";
}

// The host's API calls (CUDA's log): a row per path and function after the device's, its calls
// and milliseconds per run (0 in a run without it), its share over the device's span; calls of
// runs outside the table left out. They are neither ops nor idle time in the summary.
TEST(KernelTable, HostCallsPerPathAndFunctionTheMedianRun) {
  using H = HostCallRecord;  // function, path, run, calls, ms
  const auto host = host_call_rows({H{"cudaLaunchKernel", "gate", 0, 3, 0.006}, H{"cudaLaunchKernel", "gate", 1, 3, 0.010},
                                    H{"cudaStreamIsCapturing", "", 0, 1, 0.001},
                                    H{"cudaEventSynchronize", "gate", 2, 1, 0.002},
                                    H{"cudaLaunchKernel", "gate", 3, 9, 1.0}},  // run 3: not in the table
                                   3, 0.1);
  ASSERT_EQ(host.size(), 3u);
  EXPECT_EQ(host[0].path, "gate");
  EXPECT_EQ(host[0].name, "(host) cudaLaunchKernel");
  EXPECT_DOUBLE_EQ(host[0].calls, 2);  // 3, 3, 0
  EXPECT_DOUBLE_EQ(host[0].ms.median, 0.006);
  EXPECT_DOUBLE_EQ(host[0].ms.min, 0);
  EXPECT_DOUBLE_EQ(host[0].ms.max, 0.010);
  EXPECT_DOUBLE_EQ(host[0].share, 0.06);
  EXPECT_EQ(host[1].name, "(host) cudaStreamIsCapturing");  // 0.001, 0, 0 and 0, 0, 0.002: medians 0
  EXPECT_EQ(host[1].path, kOutsideRanges);
  EXPECT_DOUBLE_EQ(host[1].calls, 1.0 / 3);
  EXPECT_TRUE(is_host(host[0]));
  EXPECT_FALSE(is_idle(host[0]));

  using R = KernelRecord;
  std::vector<KernelRow> rows = kernel_table({{R{"gemm", "gate", 1, 0}, R{"topk", "gate", 1, 3}}});
  rows.insert(rows.end(), host.begin(), host.end());
  EXPECT_EQ(slowest_kernels(KernelLogRuns{rows, "", {}}, 3),
            "slowest kernels: gemm in gate 25.0%, topk in gate 25.0%; device idle 50.0%, the most (device idle) in "
            "gate 50.0%; the host in API calls 6.0%");
  EXPECT_EQ(api_function_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(api_function_name("cuLaunchKernel"), "cuLaunchKernel");
  EXPECT_EQ(api_function_name("cudaMemcpyAsync_ptsz_v7000"), "cudaMemcpyAsync_ptsz");
  EXPECT_EQ(api_function_name("cuMemcpy_v"), "cuMemcpy_v");
}

}  // namespace
}  // namespace moebench
