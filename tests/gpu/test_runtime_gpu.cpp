// The runtime on a GPU: streams with their own cuBLAS handles run GEMMs at once and events order
// them; the pool reuses a block on its stream at once and on another after an event; NCCL
// communicators duplicate; micro-batches of the layer on two streams equal each alone; the kernel
// log times a host wait between ranges as the device's idle time, and the host's API calls per range;
// event handles are reused. Skipped where there is no GPU.
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include "gpu/gpu_test_util.h"
#include "harness/kernel_table.h"
#include "kernels/axpy.h"
#include "kernels/gemm.h"
#include "moe/moe_layer.h"
#include "moe_test_util.h"
#include "comm/comm.h"
#include "runtime/watchdog.h"
#include "runtime/kernel_log.h"
#include "runtime/range.h"
#include "runtime/runtime.h"
#if MOEBENCH_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace moebench {
using namespace gputest;

TEST(GpuStreams, GemmsOnTwoStreamsWithTheirOwnHandlesAndEventOrdering) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(Backend::cuda, dev.default_stream());
  Stream a = dev.create_stream("a"), b = dev.create_stream("b");
  EXPECT_NE(a.blas, b.blas);
  const int n = 256;
  const auto x = random_rounded(std::size_t(n) * n, DType::f32, 1), w = random_rounded(std::size_t(n) * n, DType::f32, 2);
  std::vector<float> want(std::size_t(n) * n), want2(std::size_t(n) * n);
  gemm_cpu(dense_gemm(false, false, n, n, n, x.data(), w.data(), want.data()));
  gemm_cpu(dense_gemm(false, false, n, n, n, want.data(), w.data(), want2.data()));
  Buffer dx = upload(dev, alloc, x, DType::f32), dw = upload(dev, alloc, w, DType::f32);
  Buffer y = alloc.allocate(x.size() * 4, MemTag::temporary), z = alloc.allocate(x.size() * 4, MemTag::temporary);
  dev.set_tensor_cores(false);
  for (int round = 0; round < 10; ++round) {
    dev.fill_zero(z.data(), z.bytes(), b);
    gemm(dev.exec(a), dense_gemm(false, false, n, n, n, dx.data(), dw.data(), y.data()));
    Event done(Backend::cuda);
    done.record(a);
    done.make_wait(b);  // z = y w reads y only after a wrote it
    gemm(dev.exec(b), dense_gemm(false, false, n, n, n, y.data(), dw.data(), z.data()));
    dev.synchronize();
    EXPECT_LT(rel_l2(download(dev, alloc, z, want2.size(), DType::f32), want2), 1e-5) << round;
  }
}

#if MOEBENCH_WITH_CUDA
// A range's two events are handles a destroyed range gave back, not new ones; and a reused handle
// starts unrecorded, though the record its last owner made is still pending on a held stream.
TEST(GpuEvents, HandlesAreReusedAndAReusedOneStartsUnrecorded) {
  MOEBENCH_REQUIRE_GPU(dev);
  Stream s = dev.create_stream("s");
  { Breakdown first; ScopedRange r("range", s, &first); }
  const std::size_t before = Event::cuda_handles_created();
  for (int i = 0; i < 100; ++i) {
    Breakdown b;
    { ScopedRange r("range", s, &b); }
    EXPECT_GE(b.totals_ms().at("range"), 0.0);
  }
  EXPECT_EQ(Event::cuda_handles_created(), before) << "ranges made new CUDA events";

  std::atomic<bool> go{false};
  auto hold = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
  };
  ASSERT_EQ(cudaLaunchHostFunc(static_cast<cudaStream_t>(s.handle), hold, &go), cudaSuccess);
  { Event pending(Backend::cuda); pending.record(s); EXPECT_FALSE(pending.query()); }
  const std::size_t made = Event::cuda_handles_created();
  Event reused(Backend::cuda);
  EXPECT_EQ(Event::cuda_handles_created(), made) << "the handle given back was not reused";
  EXPECT_TRUE(reused.query()) << "a reused handle answered for its last owner's pending record";
  go = true;
  s.synchronize();
  reused.record(s);
  reused.synchronize();
  EXPECT_TRUE(reused.query());
}
#endif

TEST(GpuPool, ReusesOnItsStreamAndAcrossStreamsAfterAnEvent) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(Backend::cuda, dev.default_stream());
  Stream a = dev.create_stream("a"), b = dev.create_stream("b");
  void* p = nullptr;
  {
    Buffer x = alloc.allocate(1 << 20, MemTag::temporary, a);
    p = x.data();
  }
  {
    Buffer again = alloc.allocate(1 << 20, MemTag::temporary, a);
    EXPECT_EQ(again.data(), p);
  }
  Buffer other = alloc.allocate(1 << 20, MemTag::temporary, b);  // a's block, behind an event
  EXPECT_EQ(other.data(), p);
  EXPECT_EQ(alloc.system_allocations(), 1);
  const auto before = alloc.device_used_delta();
  for (int i = 0; i < 100; ++i) Buffer t = alloc.allocate(1 << 20, MemTag::temporary, a);
  // The only block is `other`'s: the loop takes one new block and every iteration reuses it.
  EXPECT_EQ(alloc.system_allocations(), 2) << "the pool took a new block in a loop";
  // cudaMalloc rounds that block up to its 2 MiB page (seen on an H100); a block per iteration
  // would be 100 MiB.
  ASSERT_TRUE(before && alloc.device_used_delta());
  EXPECT_LE(*alloc.device_used_delta() - *before, std::int64_t(2) << 20) << "the pool took new device memory in a loop";
}

TEST(GpuNccl, DuplicatedCommunicatorsRunOnTwoStreams) {
  MOEBENCH_REQUIRE_GPU(dev);
  Watchdog::set_timeout(60.0);  // a wait that hangs ends the test
  auto comm = make_world_communicator(*Runtime::current(), Backend::cuda);
  auto dup = comm->dup();
  EXPECT_EQ(dup->size(), comm->size());
  TrackingAllocator alloc(Backend::cuda, dev.default_stream());
  Stream a = dev.create_stream("a"), b = dev.create_stream("b");
  const std::vector<float> x(1000, 3.f);
  Buffer da = upload(dev, alloc, x, DType::f32), db = upload(dev, alloc, x, DType::f32);
  comm->all_reduce(da.data(), da.data(), 1000, DType::f32, ReduceOp::sum, a);
  dup->all_reduce(db.data(), db.data(), 1000, DType::f32, ReduceOp::sum, b);
  comm->wait(a);
  dup->wait(b);
  EXPECT_EQ(download(dev, alloc, da, 1000, DType::f32)[999], 3.f * comm->size());
  EXPECT_EQ(download(dev, alloc, db, 1000, DType::f32)[0], 3.f * comm->size());
}

TEST(GpuMicroBatches, FourContextsOnTwoStreamsEqualEachAlone) {
  MOEBENCH_REQUIRE_GPU(dev);
  MoEConfig c;
  c.hidden = 64; c.ffn = 128; c.experts = 8; c.prototypes = 2; c.top_k = 2;
  c.capacity_factor = 1.25;
  const int T = 96, m = 4;
  TrackingAllocator alloc(Backend::cuda, dev.default_stream());
  dev.set_tensor_cores(false);
  MoELayer layer(c, dev, alloc, make_local_dispatcher(DispatcherEnv{c, dev, alloc}));
  layer.init(7, dev.default_stream());
  std::vector<Buffer> x, dy, y, dx;
  for (int i = 0; i < m; ++i) {
    x.push_back(upload(dev, alloc, testing_util::tokens(T, c.hidden, 10 + i), DType::f32));
    dy.push_back(upload(dev, alloc, testing_util::tokens(T, c.hidden, 20 + i), DType::f32));
    y.push_back(alloc.allocate(x.back().bytes(), MemTag::activations));
    dx.push_back(alloc.allocate(x.back().bytes(), MemTag::activations));
  }
  // Each alone, on the default stream.
  std::vector<std::vector<float>> y_ref, dx_ref;
  for (int i = 0; i < m; ++i) {
    MoEContext mb = layer.forward(x[i].data(), T, y[i].data(), dev.default_stream());
    layer.backward(mb, dy[i].data(), dx[i].data(), dev.default_stream());
    y_ref.push_back(download(dev, alloc, y[i], std::size_t(T) * c.hidden, DType::f32));
    dx_ref.push_back(download(dev, alloc, dx[i], std::size_t(T) * c.hidden, DType::f32));
  }
  // All alive at once on two streams, backwards reversed (the weight gradients they share are
  // ordered by an event between the streams).
  Stream s[2] = {dev.create_stream("even"), dev.create_stream("odd")};
  std::vector<MoEContext> live;
  for (int i = 0; i < m; ++i) live.push_back(layer.forward(x[i].data(), T, y[i].data(), s[i % 2]));
  for (int i = m - 1; i >= 0; --i) {
    Event before(Backend::cuda);
    before.record(s[1 - i % 2]);
    before.make_wait(s[i % 2]);
    layer.backward(live[i], dy[i].data(), dx[i].data(), s[i % 2]);
  }
  dev.synchronize();
  for (int i = 0; i < m; ++i) {
    EXPECT_LT(rel_l2(download(dev, alloc, y[i], std::size_t(T) * c.hidden, DType::f32), y_ref[i]), 1e-6) << i;
    EXPECT_LT(rel_l2(download(dev, alloc, dx[i], std::size_t(T) * c.hidden, DType::f32), dx_ref[i]), 1e-6) << i;
  }
}

// The records' start times on the device: the host waiting between two ranges (as the layer's does
// for the gate's counts) is a gap in which no op runs, under the range before it and named for the
// one after; the ops within a range, launched back to back, leave far less.
TEST(GpuKernelLog, AHostWaitBetweenRangesIsTheDeviceIdleUntilTheNextRange) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const Stream s = dev.create_stream("compute");
  const std::size_t n = 1 << 16;
  Buffer x = alloc.allocate(n * 4, MemTag::temporary), y = alloc.allocate(n * 4, MemTag::temporary);
  dev.fill_zero(x.data(), n * 4, s);
  dev.fill_zero(y.data(), n * 4, s);
  dev.synchronize();
  if (const std::string why = KernelLog::start(dev.backend()); !why.empty()) GTEST_SKIP() << "no kernel log here: " << why;
  // A warm-up in no run, as log_kernel_runs has: the host's first calls once CUPTI records are slow.
  KernelLog::set_run(KernelLog::kNoRun);
  axpy(dev.exec(s), n, 1.f, x.data(), y.data(), DType::f32);
  dev.synchronize();
  KernelLog::set_run(0);
  Breakdown b;
  {
    ScopedRange gate("gate", s, &b);
    for (int i = 0; i < 4; ++i) axpy(dev.exec(s), n, 1.f, x.data(), y.data(), DType::f32);
    s.synchronize();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the host's read of the counts
  }
  {
    ScopedRange dispatch("dispatch", s, &b);
    axpy(dev.exec(s), n, 1.f, x.data(), y.data(), DType::f32);
  }
  dev.synchronize();
  const std::vector<KernelRecord> records = KernelLog::stop();
  ASSERT_EQ(records.size(), 5u);
  const std::vector<KernelRow> rows = kernel_table({records});
  double until_dispatch = -1, idle_in_gate = 0, busy = 0;
  for (const KernelRow& r : rows) {
    if (r.path == "gate" && r.name == idle_until("dispatch")) until_dispatch = r.ms.median;
    else if (r.path == "gate" && r.name == kIdle) idle_in_gate = r.ms.median;
    else if (!is_idle(r)) busy += r.ms.median;
    EXPECT_TRUE(r.path == "gate" || (r.path == "dispatch" && !is_idle(r))) << r.path << " / " << r.name;
  }
  EXPECT_GE(until_dispatch, 19.0) << "the host's wait, as the device's idle time before the dispatch";
  EXPECT_LT(until_dispatch, 200.0);
  EXPECT_LT(idle_in_gate, 10.0) << "four ops launched back to back";
  double shares = 0;
  for (const KernelRow& r : rows) shares += r.share;
  EXPECT_NEAR(shares, 1.0, 1e-9) << "ops and gaps on one stream fill the span";
  EXPECT_GT(busy, 0.0);

  // The host's side on CUDA: each launch one outermost API call under the range it was made in
  // (the driver call inside it not counted again); the host's sleep, no API call, in none of them.
  if (dev.backend() != Backend::cuda) {
    EXPECT_TRUE(KernelLog::host_calls().empty()) << "the CPU's streams make no API calls";
    return;
  }
  std::map<std::string, int> launches;
  double host_ms_in_gate = 0;
  for (const HostCallRecord& c : KernelLog::host_calls()) {
    EXPECT_EQ(c.run, 0) << c.function;
    EXPECT_GT(c.calls, 0) << c.function;
    EXPECT_GE(c.ms, 0.0) << c.function;
    if (c.function.find("LaunchKernel") != std::string::npos) launches[c.path] += c.calls;
    if (c.path == "gate") host_ms_in_gate += c.ms;
  }
  EXPECT_EQ(launches["gate"], 4);
  EXPECT_EQ(launches["dispatch"], 1);
  EXPECT_GT(host_ms_in_gate, 0.0);
  EXPECT_LT(host_ms_in_gate, 19.0) << "the sleep is the host's own time, not an API call's";
}

// CUPTI's records joined to their runs: a kernel launched outside the log's runs is in no record
// (the log stays on), one launched in no range has its run and no path, and the ops of a run
// launched from a library (cuBLAS, through the driver) are in it too.
TEST(GpuKernelLog, AnOpLaunchedOutsideTheRunsIsInNoRecordAndEachHasItsRun) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const Stream s = dev.create_stream("compute");
  const std::size_t n = 1 << 12;
  Buffer x = alloc.allocate(n * 4, MemTag::temporary), y = alloc.allocate(n * 4, MemTag::temporary),
         z = alloc.allocate(n * 4, MemTag::temporary);
  dev.fill_zero(x.data(), n * 4, s);
  dev.fill_zero(y.data(), n * 4, s);
  dev.synchronize();
  if (const std::string why = KernelLog::start(dev.backend()); !why.empty()) GTEST_SKIP() << "no kernel log here: " << why;
  axpy(dev.exec(s), n, 1.f, x.data(), y.data(), DType::f32);  // run 0, in no range
  KernelLog::set_run(KernelLog::kNoRun);
  for (int i = 0; i < 3; ++i) axpy(dev.exec(s), n, 1.f, x.data(), y.data(), DType::f32);
  dev.fill_zero(y.data(), n * 4, s);
  dev.synchronize();
  KernelLog::set_run(2);
  Breakdown b;
  {
    ScopedRange scope("gemm", s, &b);
    gemm(dev.exec(s), dense_gemm(false, false, 64, 64, 64, x.data(), y.data(), z.data()));
  }
  dev.synchronize();
  const std::vector<KernelRecord> records = KernelLog::stop();
  int in_run0 = 0, in_run2 = 0;
  for (const KernelRecord& r : records) {
    if (r.run == 0) {
      ++in_run0;
      EXPECT_EQ(r.path, "") << r.name;
    } else {
      EXPECT_EQ(r.run, 2) << r.name;
      EXPECT_EQ(r.path, "gemm") << r.name;
      ++in_run2;
    }
  }
  EXPECT_EQ(in_run0, 1) << "the axpy before the runs were switched off, alone";
  EXPECT_GE(in_run2, 1) << "the GEMM's kernels";
}

}  // namespace moebench
